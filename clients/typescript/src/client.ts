import createClient, { type Client } from 'openapi-fetch';
import { checkAnswer } from './answers.ts';
import { readEvents, type ServerEvent } from './events.ts';
import type { components, paths } from './generated/api.ts';
import { InvalidAnswer, TemporaProblem } from './problems.ts';
import { DEFAULT_RETRY, type RetryPolicy, retryingFetch } from './transport.ts';

type Schemas = components['schemas'];
export type TokenPair = Schemas['GatewayTokenPair'];
export type SignIn = Schemas['GatewaySignIn'];
export type CreatedApiKey = Schemas['GatewayCreatedApiKey'];
export type GenerateRequest = Schemas['GenerationGenerateRequest'];
export type Scene = Schemas['GenerationScene'];
export type SimulateRequest = Schemas['SimulationSimulateRequest'];
export type SimulationRun = Schemas['SimulationSimulationRun'];
export type ConductorResponse = Schemas['ConductorConductorResponse'];
export type Problem = Schemas['GatewayProblem'];
/** The generation stream: `start`, one `agent` per reported agent, then `done` (the scene) or `error` (thrown as a TemporaProblem). */
export type GenerationEvent = ServerEvent<'start' | 'agent' | 'done', Record<string, unknown>>;
/** A simulation's progress: `run`, one `step` per completed step, then `end` (the run as it ended). */
export type SimulationEvent = ServerEvent<'run' | 'step' | 'end', Record<string, unknown>>;

export interface TemporaOptions {
  /** The gateway (or the public host in front of it), e.g. `https://api.tempora.example`. */
  baseUrl: string;
  /** Sends a request; `globalThis.fetch` unless given. */
  fetch?: (request: Request) => Promise<Response>;
  retry?: Partial<RetryPolicy>;
  /** A token pair kept from an earlier session. */
  tokens?: TokenPair;
  /** An API key (X-API-Key), used when no token pair is held. */
  apiKey?: string;
  /** Told each time the pair changes (sign-in, rotation, sign-out), so an app can keep it. */
  onTokens?: (tokens: TokenPair | undefined) => void;
  /**
   * Headers sent with every request, streams and retries included: an `X-Request-ID`, a service's own key,
   * an `Authorization` forwarded from the caller. A call's own header of the same name takes the place of
   * one of these. A credential among them is sent as a call's own would be: it takes the place of
   * `apiKey`, and a signed-in pair's access token takes the place of a Bearer one.
   */
  headers?: Readonly<Record<string, string>>;
}

/** The operations whose POST starts paid, asynchronous work: each gets an Idempotency-Key, so a retry never starts it twice. */
const KEYED = new Set(['POST /api/v1/timepoints/generate', 'POST /api/v1/simulate']);
const REFRESH = '/api/v1/auth/refresh';

/** The data of a call through `tempora.api`, whose failures are thrown (as TemporaProblem or InvalidAnswer) before it returns. */
export async function data<T>(call: Promise<{ data?: T; error?: unknown }>): Promise<Exclude<T, undefined>> {
  return (await call).data as Exclude<T, undefined>;
}

export class Tempora {
  /** Every public operation, typed from the documents (openapi-fetch); answers are validated before they are returned. */
  readonly api: Client<paths>;
  #tokens: TokenPair | undefined;
  #apiKey: string | undefined;
  #refreshing: Promise<void> | undefined;
  readonly #onTokens: ((tokens: TokenPair | undefined) => void) | undefined;

  constructor(options: TemporaOptions) {
    this.#tokens = options.tokens;
    this.#apiKey = options.apiKey;
    this.#onTokens = options.onTokens;
    const send = options.fetch ?? ((request: Request) => globalThis.fetch(request));
    this.api = createClient<paths>({
      baseUrl: options.baseUrl,
      headers: options.headers,
      fetch: retryingFetch(this.#authorised(send), { ...DEFAULT_RETRY, ...options.retry }),
    });
    this.api.use({
      onRequest: ({ request, schemaPath }) => {
        if (KEYED.has(`${request.method} ${schemaPath}`) && !request.headers.has('idempotency-key'))
          request.headers.set('Idempotency-Key', crypto.randomUUID());
        return request;
      },
      onResponse: async ({ request, response, schemaPath, params }) => {
        await checkAnswer(request.method, schemaPath, (params.path ?? {}) as Record<string, unknown>, response);
        return response;
      },
    });
  }

  get tokens(): TokenPair | undefined {
    return this.#tokens;
  }

  /** Signs in as the store-review demo account. */
  async signInDemo(): Promise<SignIn> {
    return this.#signedIn(await data(this.api.POST('/api/v1/auth/demo')));
  }

  /** Exchanges a Sign in with Apple identity token for a session. */
  async signInWithApple(body: { identity_token: string; nonce?: string; name?: string }): Promise<SignIn> {
    return this.#signedIn(await data(this.api.POST('/api/v1/auth/apple', { body })));
  }

  /** Exchanges a Google ID token for a session. */
  async signInWithGoogle(body: { id_token: string; nonce?: string }): Promise<SignIn> {
    return this.#signedIn(await data(this.api.POST('/api/v1/auth/google', { body })));
  }

  /** Exchanges a GitHub authorization code (with its PKCE verifier, when the authorization carried a challenge) for a session. */
  async signInWithGitHub(body: { code: string; redirect_uri?: string; code_verifier?: string }): Promise<SignIn> {
    return this.#signedIn(await data(this.api.POST('/api/v1/auth/github', { body })));
  }

  /**
   * Rotates the pair: the refresh token is spent and a new pair kept. Done by itself, once, when a call
   * with the access token is refused with 401; concurrent callers share one rotation.
   */
  refresh(): Promise<void> {
    this.#refreshing ??= this.#rotate().finally(() => {
      this.#refreshing = undefined;
    });
    return this.#refreshing;
  }

  /** Ends this session on the server (its refresh token is revoked) and forgets the pair. */
  async signOut(): Promise<void> {
    const refresh_token = this.#tokens?.refresh_token;
    if (refresh_token) await this.api.POST('/api/v1/auth/logout', { body: { refresh_token } });
    this.#keep(undefined);
  }

  /** Creates an API key for the signed-in account (its secret is shown only in this answer). */
  async createApiKey(body: { name: string; scopes?: ('read' | 'write')[] }): Promise<CreatedApiKey> {
    return data(this.api.POST('/api/v1/users/me/api-keys', { body }));
  }

  /** Uses an API key (X-API-Key) instead of a token pair. */
  useApiKey(key: string): void {
    this.#apiKey = key;
    this.#keep(undefined);
  }

  /** Renders a scene, yielding its progress as each agent reports; ends with the `done` event, which carries the scene. */
  async *streamScene(body: GenerateRequest): AsyncGenerator<GenerationEvent> {
    const { response } = await this.api.POST('/api/v1/timepoints/generate/stream', { body, parseAs: 'stream' });
    // Closing the connection cancels the remaining agents, so the stream is neither retried nor resumed.
    for await (const event of readEvents(response.body!, 'POST /api/v1/timepoints/generate/stream')) {
      if (event.event === 'error') throw new TemporaProblem(event.data as Problem);
      yield event as GenerationEvent;
      if (event.event === 'done') return;
    }
    throw new InvalidAnswer('POST /api/v1/timepoints/generate/stream', 200, 'the stream ended before `done`');
  }

  /** Starts a simulation; the Idempotency-Key (given, or drawn by the client) is the same on every retry, so one run starts. */
  async simulate(body: SimulateRequest, options: { idempotencyKey?: string } = {}): Promise<SimulationRun> {
    const header = options.idempotencyKey ? { 'idempotency-key': options.idempotencyKey } : undefined;
    return data(this.api.POST('/api/v1/simulate', { body, params: { header } }));
  }

  /**
   * A run's events until `end`. The stream replays the steps completed before it opened, so a dropped
   * connection is opened again (with Last-Event-ID) and the events already yielded are skipped; `error`
   * (the stream cannot go on, the run does) is a reason to reconnect too.
   */
  async *simulationEvents(id: string, options: { lastEventId?: string; reconnects?: number } = {}): AsyncGenerator<SimulationEvent> {
    let last = Number(options.lastEventId ?? 0);
    let reconnects = options.reconnects ?? 3;
    for (;;) {
      try {
        const headers = last > 0 ? { 'Last-Event-ID': String(last) } : undefined;
        const { response } = await this.api.GET('/api/v1/simulations/{id}/events', { params: { path: { id } }, headers, parseAs: 'stream' });
        for await (const event of readEvents(response.body!, 'GET /api/v1/simulations/{id}/events')) {
          if (event.event === 'error') throw new TemporaProblem(event.data as Problem);
          if (Number(event.id) <= last) continue;
          last = Number(event.id);
          yield event as SimulationEvent;
          if (event.event === 'end') return;
        }
      } catch (error) {
        // A refusal (a problem the server answered before the stream) or a bad answer is final.
        if (error instanceof InvalidAnswer || (error instanceof TemporaProblem && error.status !== 503) || reconnects-- <= 0) throw error;
      }
      if (reconnects-- <= 0) throw new InvalidAnswer('GET /api/v1/simulations/{id}/events', 200, 'the stream keeps ending before `end`');
    }
  }

  /** Asks the conductor; it answers with its reply and what each tool it called spent. */
  async ask(content: string): Promise<ConductorResponse> {
    return data(this.api.POST('/api/v1/conductor/messages', { body: { content } }));
  }

  #signedIn(answer: SignIn): SignIn {
    this.#keep({
      access_token: answer.access_token,
      refresh_token: answer.refresh_token,
      token_type: answer.token_type,
      expires_in: answer.expires_in,
      refresh_expires_in: answer.refresh_expires_in,
    });
    return answer;
  }

  #keep(tokens: TokenPair | undefined) {
    this.#tokens = tokens;
    this.#onTokens?.(tokens);
  }

  async #rotate(): Promise<void> {
    const refresh_token = this.#tokens?.refresh_token;
    if (!refresh_token) throw new Error('no refresh token to rotate');
    try {
      this.#keep(await data(this.api.POST(REFRESH, { body: { refresh_token } })));
    } catch (error) {
      if (error instanceof TemporaProblem && error.status === 401) this.#keep(undefined);
      throw error;
    }
  }

  /** Puts the credential on each try, and on a 401 to the access token rotates the pair once and sends the request again. */
  #authorised(send: (request: Request) => Promise<Response>): (request: Request) => Promise<Response> {
    return async (request) => {
      const bearer = this.#credential(request);
      const rotatable = bearer && this.#tokens?.refresh_token && new URL(request.url).pathname !== REFRESH;
      const spare = rotatable ? request.clone() : undefined;
      const response = await send(request);
      if (response.status !== 401 || !spare) return response;
      await response.body?.cancel();
      await this.refresh();
      this.#credential(spare);
      return send(spare);
    };
  }

  /** Sets the current credential on the request; true when it is the access token. */
  #credential(request: Request): boolean {
    if (request.headers.has('authorization') || request.headers.has('x-api-key')) {
      if (!this.#tokens || !request.headers.get('authorization')?.startsWith('Bearer ')) return false;
    }
    if (this.#tokens) {
      request.headers.set('Authorization', `Bearer ${this.#tokens.access_token}`);
      return true;
    }
    if (this.#apiKey) request.headers.set('X-API-Key', this.#apiKey);
    return false;
  }
}
