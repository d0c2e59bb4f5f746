import type { Context, Next } from 'koa';
import type { Logger } from '../observability/logger.ts';

export interface ProblemFieldError {
  path: string;
  message: string;
}

const TITLES: Record<number, string> = {
  400: 'Bad Request',
  401: 'Unauthorized',
  402: 'Payment Required',
  403: 'Forbidden',
  404: 'Not Found',
  405: 'Method Not Allowed',
  409: 'Conflict',
  413: 'Content Too Large',
  415: 'Unsupported Media Type',
  422: 'Unprocessable Content',
  429: 'Too Many Requests',
  500: 'Internal Server Error',
  502: 'Bad Gateway',
  503: 'Service Unavailable',
  504: 'Gateway Timeout',
};

export const PROBLEM_CONTENT_TYPE = 'application/problem+json';

/** An RFC 9457 problem: thrown anywhere, rendered by `problemMiddleware`. */
export class Problem extends Error {
  readonly status: number;
  readonly title: string;
  readonly type: string;
  readonly errors: ProblemFieldError[] | undefined;
  readonly headers: Record<string, string>;
  readonly extensions: Record<string, unknown>;

  constructor(
    status: number,
    detail: string,
    options: {
      title?: string;
      type?: string;
      errors?: ProblemFieldError[];
      headers?: Record<string, string>;
      extensions?: Record<string, unknown>;
    } = {},
  ) {
    super(detail);
    this.status = status;
    this.title = options.title ?? TITLES[status] ?? 'Error';
    this.type = options.type ?? `https://tempora.dev/problems/${slugOf(this.title)}`;
    this.errors = options.errors;
    this.headers = options.headers ?? {};
    this.extensions = options.extensions ?? {};
  }

  toJSON(instance?: string): Record<string, unknown> {
    return {
      type: this.type,
      title: this.title,
      status: this.status,
      detail: this.message,
      ...(instance ? { instance } : {}),
      ...(this.errors ? { errors: this.errors } : {}),
      ...this.extensions,
    };
  }
}

function slugOf(title: string): string {
  return title
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-|-$/g, '');
}

export const badRequest = (detail: string) => new Problem(400, detail);
export const unauthorized = (detail: string, scheme: string) => new Problem(401, detail, { headers: { 'WWW-Authenticate': scheme } });
export const forbidden = (detail: string) => new Problem(403, detail);
export const notFound = (detail: string) => new Problem(404, detail);
export const conflict = (detail: string) => new Problem(409, detail);
export const unprocessable = (detail: string, errors: ProblemFieldError[]) =>
  new Problem(422, detail, { title: 'Validation failed', type: 'https://tempora.dev/problems/validation', errors });

/** The answer to an error nobody anticipated: no detail leaks, the request id leads to the log. */
export const unexpectedProblem = () => new Problem(500, 'an unexpected error occurred; quote the X-Request-ID when reporting it');

/** Seconds a client is told to wait when a dependency is down: about what a database restart takes. */
export const OUTAGE_RETRY_AFTER_SECONDS = 5;

/** PostgreSQL's SQLSTATEs for a server that is going, gone or not yet back (class 08, 57P01-57P03, 53300). */
const UNAVAILABLE_SQLSTATE = /^(08...|57P0[1-3]|53300)$/;
/** Socket failures (pg, node-redis) and node-redis's own "not connected" errors. */
const UNAVAILABLE_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENOTCONN']);
const UNAVAILABLE_NAMES = new Set([
  'KnexTimeoutError',
  'ClientClosedError',
  'ClientOfflineError',
  'SocketClosedUnexpectedlyError',
  'ConnectionTimeoutError',
  'ReconnectStrategyError',
]);
/**
 * What pg says when a connection dies under a query (it sets no code then), anywhere in the message: knex
 * prefixes the query ("select … - Connection terminated unexpectedly").
 */
const UNAVAILABLE_MESSAGE =
  /(Connection terminated|Client has encountered a connection error|Client was closed and is not queryable|Unable to acquire a connection|the database system is (starting up|shutting down|not yet accepting|in recovery))/;

/**
 * Whether `error` (or what it wraps) says the database or Redis could not be reached: the request was
 * fine and may be sent again shortly, so it is answered 503 with Retry-After, not 500.
 */
export function isDependencyOutage(error: unknown): boolean {
  for (let current = error, depth = 0; current && typeof current === 'object' && depth < 5; current = (current as { cause?: unknown }).cause, depth += 1) {
    const { code, name, message, errors } = current as { code?: unknown; name?: unknown; message?: unknown; errors?: unknown };
    if (typeof code === 'string' && (UNAVAILABLE_SQLSTATE.test(code) || UNAVAILABLE_CODES.has(code))) return true;
    if (typeof name === 'string' && UNAVAILABLE_NAMES.has(name)) return true;
    if (typeof message === 'string' && UNAVAILABLE_MESSAGE.test(message)) return true;
    // Node's AggregateError of a connection refused on every address.
    if (Array.isArray(errors) && errors.some((inner) => isDependencyOutage(inner))) return true;
  }
  return false;
}

export const dependencyOutageProblem = () =>
  new Problem(503, `a database or service this one depends on is unreachable; retry in ${OUTAGE_RETRY_AFTER_SECONDS} s`, {
    headers: { 'Retry-After': String(OUTAGE_RETRY_AFTER_SECONDS) },
  });

/** Maps errors raised by Koa's own middleware (http-errors) and data store outages onto problems. */
export function toProblem(error: unknown): Problem | undefined {
  if (error instanceof Problem) return error;
  if (isDependencyOutage(error)) return dependencyOutageProblem();
  const candidate = error as { status?: unknown; statusCode?: unknown; expose?: unknown; message?: unknown };
  const status = typeof candidate.status === 'number' ? candidate.status : typeof candidate.statusCode === 'number' ? candidate.statusCode : undefined;
  if (status === undefined || status < 400 || status >= 500) return undefined;
  return new Problem(status, candidate.expose === false ? (TITLES[status] ?? 'Error') : String(candidate.message ?? TITLES[status]));
}

export function writeProblem(ctx: Context, problem: Problem): void {
  ctx.status = problem.status;
  for (const [name, value] of Object.entries(problem.headers)) ctx.set(name, value);
  ctx.type = PROBLEM_CONTENT_TYPE;
  ctx.body = problem.toJSON(ctx.path);
}

/** Outermost error boundary: every failure leaves as problem+json, never with a stack trace. */
export function problemMiddleware(logger: Logger) {
  return async function problems(ctx: Context, next: Next): Promise<void> {
    try {
      await next();
      // A handler that wrote to the raw response itself (MCP, proxies) has answered already.
      if (ctx.respond === false) return;
      if (ctx.status === 404 && ctx.body === undefined) {
        writeProblem(ctx, notFound(`no route for ${ctx.method} ${ctx.path}`));
      } else if (ctx.status === 405 && (ctx.body === undefined || typeof ctx.body === 'string')) {
        writeProblem(ctx, new Problem(405, `${ctx.method} is not allowed on ${ctx.path}`, { headers: { Allow: String(ctx.response.get('Allow')) } }));
      }
    } catch (error) {
      const problem = toProblem(error);
      if (problem) {
        // An outage answered 503 is still the operator's to see.
        if (problem.status === 503 && !(error instanceof Problem))
          logger.warn({ err: error, requestId: ctx.state.requestId, path: ctx.path }, 'data store unreachable');
        writeProblem(ctx, problem);
        return;
      }
      logger.error({ err: error, requestId: ctx.state.requestId, path: ctx.path }, 'unhandled error');
      writeProblem(ctx, unexpectedProblem());
    }
  };
}
