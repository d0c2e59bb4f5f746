import { data, InvalidAnswer, type RetryPolicy, Tempora, TemporaProblem } from '@tempora/client';
import { ToolFailure } from '../domain/tools.ts';

/** Whom a call is for: the user (X-User-ID), the request it serves (X-Request-ID) and its deadline. */
export interface OnBehalf {
  userId: string;
  requestId: string;
  signal: AbortSignal;
}

/** What each call through `PlatformPeer.call` is sent with. */
interface CallInit {
  headers: Record<string, string>;
  signal: AbortSignal;
}

/**
 * The client's retries (safe requests only: reads, and starts carrying an Idempotency-Key), but a peer asking
 * for a wait longer than a second is not waited for: its refusal goes to the model, which has a user waiting.
 * Shorter waits end with the call's deadline (the client's back-off follows the request's signal).
 */
const RETRY: Partial<RetryPolicy> = { maxWaitSeconds: 1 };

/** `fetch failed` says little: undici's cause (ECONNREFUSED, a reset) says why. */
function why(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  return error.cause instanceof Error ? `${error.message} (${error.cause.message})` : error.message;
}

/**
 * One of the platform's services through its own published client (@tempora/client, typed by the public
 * OpenAPI documents, failing closed on any answer outside them), called as the gateway's proxy calls it:
 * the conductor's X-Service-Key on every request, the user's X-User-ID and the X-Request-ID on each call.
 * Every failure is the tool's (a ToolFailure: a paid call is refunded, the model is told why).
 */
export class PlatformPeer {
  readonly api: Tempora['api'];
  private readonly timeoutMs: number;
  private readonly peer: string;

  constructor(baseUrl: string, serviceKey: string | undefined, timeoutMs: number, peer: string) {
    this.api = new Tempora({ baseUrl, retry: RETRY, headers: serviceKey ? { 'X-Service-Key': serviceKey } : {} }).api;
    this.timeoutMs = timeoutMs;
    this.peer = peer;
  }

  /** The validated answer of `send`, given the call's headers and its deadline (the request's, or the peer timeout if sooner). */
  async call<T>(on: OnBehalf, send: (init: CallInit) => Promise<{ data?: T; error?: unknown }>): Promise<Exclude<T, undefined>> {
    const init = {
      headers: { 'X-User-ID': on.userId, 'X-Request-ID': on.requestId },
      signal: AbortSignal.any([on.signal, AbortSignal.timeout(this.timeoutMs)]),
    };
    try {
      return await data(send(init));
    } catch (error) {
      if (error instanceof TemporaProblem) throw new ToolFailure(`${this.peer} answered ${error.status}: ${error.detail}`);
      if (error instanceof InvalidAnswer) throw new ToolFailure(`${this.peer} answered outside its schema: ${error.reason} (its ${error.status} answer)`);
      throw new ToolFailure(`${this.peer} could not be reached or did not answer in time: ${why(error)}`);
    }
  }
}
