/** An RFC 9457 problem the server answered with (application/problem+json), validated against its schema. */
export class TemporaProblem extends Error {
  override readonly name = 'TemporaProblem';
  readonly status: number;
  readonly type: string;
  readonly title: string;
  readonly detail: string;
  readonly instance: string | undefined;
  /** Field errors of a 422, as the server lists them. */
  readonly errors: { path: string; message: string }[];
  /** Seconds to wait before trying again (Retry-After, in seconds or as an HTTP date), when the server said. */
  readonly retryAfter: number | undefined;

  constructor(
    problem: { status: number; type: string; title: string; detail: string; instance?: string; errors?: { path: string; message: string }[] },
    retryAfter?: number,
  ) {
    super(`${problem.status} ${problem.title}: ${problem.detail}`);
    this.status = problem.status;
    this.type = problem.type;
    this.title = problem.title;
    this.detail = problem.detail;
    this.instance = problem.instance;
    this.errors = problem.errors ?? [];
    this.retryAfter = retryAfter;
  }
}

/**
 * An answer the client refuses: it does not match its documented schema, has a status or media type the
 * operation does not document, or answers for another resource than the one asked. Never passed on.
 */
export class InvalidAnswer extends Error {
  override readonly name = 'InvalidAnswer';
  readonly operation: string;
  readonly status: number;
  readonly reason: string;

  constructor(operation: string, status: number, reason: string) {
    super(`${operation} answered ${status}, which the client refuses: ${reason}`);
    this.operation = operation;
    this.status = status;
    this.reason = reason;
  }
}

/** Retry-After in seconds, from either of its forms (delay-seconds or an HTTP date); undefined when absent or unreadable. */
export function retryAfterSeconds(header: string | null, now = Date.now()): number | undefined {
  if (header === null || header.trim() === '') return undefined;
  if (/^\d+$/.test(header.trim())) return Number(header.trim());
  const at = Date.parse(header);
  return Number.isNaN(at) ? undefined : Math.max(0, Math.ceil((at - now) / 1000));
}
