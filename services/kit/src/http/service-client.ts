import { request } from 'undici';
import { z } from 'zod';
import { Problem } from './errors.ts';

/**
 * A peer answered outside its schema (or not in JSON): the answer is never passed on. Left uncaught it is
 * answered 502, its detail naming the peer and the first thing that did not match; a caller with its own
 * failure (a tool's, a ledger's) wraps its message.
 */
export class UnexpectedAnswer extends Problem {
  override name = 'UnexpectedAnswer';
  /** What did not match (or that the answer is not JSON), without the peer. */
  readonly mismatch: string;

  constructor(peer: string, mismatch: string) {
    super(502, `${peer} answered outside its schema: ${mismatch}`);
    this.mismatch = mismatch;
  }
}

/** The one field of an RFC 9457 problem a refusal is told by. */
const ProblemDetail = z.object({ detail: z.string() });

/** What the callee answered: its status and body text; what each status means is the caller's to say. */
export class ServiceReply {
  readonly status: number;
  readonly text: string;
  private readonly peer: string;

  constructor(peer: string, status: number, text: string) {
    this.peer = peer;
    this.status = status;
    this.text = text;
  }

  /** The body read with the schema the peer documents it by; throws UnexpectedAnswer when it is not JSON or does not match. */
  json<S extends z.ZodType>(schema: S): z.output<S> {
    let body: unknown;
    try {
      body = JSON.parse(this.text);
    } catch {
      throw new UnexpectedAnswer(this.peer, `its ${this.status} answer is not JSON`);
    }
    const parsed = schema.safeParse(body);
    if (parsed.success) return parsed.data;
    const issue = parsed.error.issues[0]!;
    throw new UnexpectedAnswer(this.peer, `${issue.path.length ? issue.path.join('.') : 'the body'}: ${issue.message} (its ${this.status} answer)`);
  }

  /** What a refusal says: its problem's `detail`, else the start of its body. */
  detail(max = 300): string {
    let body: unknown;
    try {
      body = JSON.parse(this.text);
    } catch {
      // not a problem document: the text itself says it
    }
    const problem = ProblemDetail.safeParse(body);
    return (problem.success ? problem.data.detail : this.text).slice(0, max);
  }
}

export interface ServiceCall {
  /** Follows the work across services (X-Request-ID). */
  requestId: string;
  headers?: Record<string, string>;
  /** Sent as the JSON body. */
  json?: unknown;
  signal?: AbortSignal;
}

/**
 * One Tempora service calling another: its base URL, the X-Service-Key the callee expects, and one
 * timeout for the answer's head and for its body. Rejects when the callee cannot be reached or does not
 * answer in time (or `signal` aborts). `peer` names the callee in what its answers' failures say.
 */
export class ServiceClient {
  readonly baseUrl: string;
  private readonly serviceKey: string | undefined;
  private readonly timeoutMs: number;
  private readonly peer: string;

  constructor(baseUrl: string, serviceKey: string | undefined, timeoutMs: number, peer?: string) {
    this.baseUrl = baseUrl.replace(/\/$/, '');
    this.serviceKey = serviceKey;
    this.timeoutMs = timeoutMs;
    this.peer = peer ?? `the service at ${this.baseUrl}`;
  }

  async call(method: 'GET' | 'POST' | 'PUT' | 'DELETE', path: string, call: ServiceCall): Promise<ServiceReply> {
    const headers: Record<string, string> = { accept: 'application/json', 'x-request-id': call.requestId };
    if (this.serviceKey) headers['x-service-key'] = this.serviceKey;
    if (call.json !== undefined) headers['content-type'] = 'application/json';
    const response = await request(`${this.baseUrl}${path}`, {
      method,
      headers: { ...headers, ...call.headers },
      body: call.json === undefined ? undefined : JSON.stringify(call.json),
      headersTimeout: this.timeoutMs,
      bodyTimeout: this.timeoutMs,
      ...(call.signal ? { signal: call.signal } : {}),
    });
    return new ServiceReply(this.peer, response.statusCode, await response.body.text());
  }
}
