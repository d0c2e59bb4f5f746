import { request } from 'undici';

/** What the callee answered: its status and body text; what each status means is the caller's to say. */
export interface ServiceReply {
  status: number;
  text: string;
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
 * answer in time (or `signal` aborts).
 */
export class ServiceClient {
  readonly baseUrl: string;
  private readonly serviceKey: string | undefined;
  private readonly timeoutMs: number;

  constructor(baseUrl: string, serviceKey: string | undefined, timeoutMs: number) {
    this.baseUrl = baseUrl.replace(/\/$/, '');
    this.serviceKey = serviceKey;
    this.timeoutMs = timeoutMs;
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
    return { status: response.statusCode, text: await response.body.text() };
  }
}
