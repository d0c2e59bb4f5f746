import type Router from '@koa/router';
import type { Context, Middleware } from 'koa';
import type { z } from 'zod';
import type { Authenticator, Principal } from './auth.ts';
import { Problem, type ProblemFieldError, unauthorized, unprocessable } from './errors.ts';
import { carriesBody, isJsonContentType } from './json-body.ts';

export type HttpMethod = 'get' | 'post' | 'put' | 'patch' | 'delete';
type AnyObject = z.ZodObject<z.ZodRawShape>;

export interface ResponseSpec {
  description: string;
  schema?: z.ZodType;
  /** Defaults to application/json. */
  contentType?: string;
  /**
   * OpenAPI links: operations this response's values feed (`{ getRun: { operationId: 'getRun', parameters:
   * { id: '$response.body#/id' } } }`), so clients and stateful testers can follow the chain.
   */
  links?: Record<string, { operationId: string; parameters: Record<string, string>; description?: string }>;
  /** Response header fields the operation sets (documented only), by name. */
  headers?: AnyObject;
}

export interface RouteInput<Q extends AnyObject, P extends AnyObject, B extends z.ZodType, H extends AnyObject = AnyObject> {
  query: z.output<Q>;
  params: z.output<P>;
  headers: z.output<H>;
  body: z.output<B>;
}

/**
 * One HTTP operation: the zod schemas that validate its input are the ones the OpenAPI document is
 * generated from, so the documentation cannot drift from what the service accepts.
 */
export interface RouteDefinition<
  Q extends AnyObject = AnyObject,
  P extends AnyObject = AnyObject,
  B extends z.ZodType = z.ZodType,
  H extends AnyObject = AnyObject,
> {
  method: HttpMethod;
  /** OpenAPI path template, e.g. `/api/v1/moments/{path}`. */
  path: string;
  /** A path parameter that may contain slashes (it must be the template's last segment). */
  wildcard?: string;
  /** Further templates answering the same operation (documented once, under `path`). */
  aliases?: string[];
  operationId: string;
  summary: string;
  description?: string;
  tags: string[];
  /**
   * Security schemes of which any one admits the request; `[]` declares the operation public. Required, so
   * no route is public by omission: test/security's authorization matrix reads it from /openapi.json.
   */
  security: string[];
  query?: Q;
  params?: P;
  /**
   * Request header fields the operation reads, by lower-case name (Node's), validated and documented like
   * the query; only the fields named are checked (a request carries many others).
   */
  headers?: H;
  body?: B;
  /** A body the handler validates itself (e.g. to report errors per batch item); documented only. */
  documentedBody?: z.ZodType;
  responses: Record<number, ResponseSpec>;
  /** Returns the response body (or sets ctx.body itself and returns undefined). */
  handler(ctx: Context, input: RouteInput<Q, P, B, H>): unknown;
}

/** The same OpenAPI link to each of `operationIds`, filling their parameters from this response. */
export function linksTo(parameters: Record<string, string>, ...operationIds: string[]): NonNullable<ResponseSpec['links']> {
  return Object.fromEntries(operationIds.map((operationId) => [operationId, { operationId, parameters }]));
}

export function defineRoute<
  Q extends AnyObject = AnyObject,
  P extends AnyObject = AnyObject,
  B extends z.ZodType = z.ZodUnknown,
  H extends AnyObject = AnyObject,
>(route: RouteDefinition<Q, P, B, H>): RouteDefinition {
  return route as unknown as RouteDefinition;
}

/**
 * Every router of a service matches paths exactly: case-sensitively, and a trailing slash is another
 * path. The gateway prices and authorizes by path, so a service must not answer a spelling of a path
 * (`/API/v1/…`, `…/generate/`) that the gateway read as a different one; aliases are listed explicitly.
 */
export const STRICT_PATHS = { sensitive: true, strict: true } as const;

/** `{name}` becomes `:name`, and the wildcard parameter `*name`, in the router's syntax. */
export function toRouterPath(template: string, wildcard?: string): string {
  return template.replace(/\{(\w+)\}/g, (_, name: string) => (name === wildcard ? `*${name}` : `:${name}`));
}

export function zodIssues(error: z.ZodError, prefix: string): ProblemFieldError[] {
  return error.issues.map((issue) => ({
    path: [prefix, ...issue.path.map(String)].filter(Boolean).join('.'),
    message: issue.message,
  }));
}

/**
 * Adds an error for every string (or object key) PostgreSQL cannot store: a NUL character, or a lone UTF-16
 * surrogate (no UTF-8 encoding exists for it). Refused here, once for every route of every service, rather
 * than by the database as a 500 after the request has been accepted. Walked with a stack of its own, not
 * by recursion, so no depth of value (a query, or a body from any reader) can exhaust the call stack.
 */
export function findUnstorableText(value: unknown, path: string, errors: ProblemFieldError[]): void {
  const pending: Array<[unknown, string]> = [[value, path]];
  while (pending.length > 0) {
    const [current, at] = pending.pop()!;
    if (typeof current === 'string') {
      if (current.includes('\u0000')) errors.push({ path: at, message: 'must not contain a NUL character (U+0000)' });
      else if (!current.isWellFormed()) errors.push({ path: at, message: 'must be well-formed Unicode (it holds a lone UTF-16 surrogate)' });
    } else if (current !== null && typeof current === 'object') {
      // Pushed in reverse, so errors come out in document order, as the recursive walk reported them.
      const entries = Array.isArray(current) ? current.map((item, index) => [String(index), item] as const) : Object.entries(current);
      for (let index = entries.length - 1; index >= 0; index -= 1) {
        const [key, item] = entries[index]!;
        pending.push([item, `${at}.${key}`]);
        if (!Array.isArray(current)) pending.push([key, `${at}.${key}`]);
      }
    }
  }
}

/** A part checked for unstorable text, then by its schema; a route that validates a part itself (no schema) gets it checked for text only. */
function parsePart<S extends z.ZodType>(schema: S | undefined, value: unknown, part: string, errors: ProblemFieldError[]): unknown {
  const before = errors.length;
  findUnstorableText(value, part, errors);
  if (errors.length > before) return undefined;
  if (!schema) return value;
  const result = schema.safeParse(value);
  if (result.success) return result.data;
  errors.push(...zodIssues(result.error, part));
  return undefined;
}

/** Principals of every valid credential the request carried, by security scheme. */
export type Principals = Map<string, Principal>;

/**
 * Resolves every credential presented. A present but invalid one is refused with 401 whatever the route,
 * but only by `refuseInvalidCredentials`, after rate limiting, so guessing keys costs the guesser's IP quota.
 */
export function identify(authenticators: Authenticator[]): Middleware {
  return async (ctx, next) => {
    const principals: Principals = new Map();
    for (const authenticator of authenticators) {
      try {
        const principal = authenticator.authenticate(ctx);
        if (principal) principals.set(authenticator.scheme, principal);
      } catch (error) {
        ctx.state.credentialProblem ??= error;
      }
    }
    ctx.state.principals = principals;
    ctx.state.principal = ctx.state.credentialProblem ? undefined : principals.values().next().value;
    await next();
  };
}

export const refuseInvalidCredentials: Middleware = async (ctx, next) => {
  if (ctx.state.credentialProblem) throw ctx.state.credentialProblem;
  await next();
};

function authorize(route: RouteDefinition, authenticators: Authenticator[]): Middleware {
  const schemes = route.security ?? [];
  const challenges = authenticators.filter((a) => schemes.includes(a.scheme)).map((a) => a.challenge);
  return async (ctx, next) => {
    const principals = ctx.state.principals as Principals | undefined;
    const granted = schemes.find((scheme) => principals?.has(scheme));
    if (!granted) {
      if (principals && principals.size > 0) {
        throw new Problem(403, `this operation needs one of: ${schemes.join(', ')}`);
      }
      const error = unauthorized(`this operation needs one of: ${schemes.join(', ')}`, challenges.join(', ') || 'ApiKey');
      throw error;
    }
    ctx.state.principal = principals?.get(granted);
    await next();
  };
}

function validateAndHandle(route: RouteDefinition): Middleware {
  return async (ctx) => {
    const errors: ProblemFieldError[] = [];
    const query = parsePart(route.query, ctx.query, 'query', errors);
    const params = parsePart(route.params, ctx.params, 'params', errors);
    const headers = route.headers ? parsePart(route.headers, ctx.headers, 'headers', errors) : {};
    // No bytes at all (no Content-Length or 0, not chunked) is a missing body, whatever its declared type.
    const empty = !carriesBody(ctx.req);
    if ((route.body || route.documentedBody) && !empty && ctx.request.type && !isJsonContentType(ctx.get('Content-Type'))) {
      throw new Problem(415, `send the body as application/json, not ${ctx.request.type}`);
    }
    let body: unknown;
    const bodySchema = route.body ?? route.documentedBody;
    if (empty && bodySchema && !bodySchema.safeParse(undefined).success) errors.push({ path: 'body', message: 'a JSON body is required' });
    else body = parsePart(route.body, empty ? undefined : (ctx.request as { body?: unknown }).body, 'body', errors);
    if (errors.length > 0) throw unprocessable(`the request is invalid: ${errors.map((e) => `${e.path}: ${e.message}`).join('; ')}`, errors);
    const result = await route.handler(ctx, { query, params, headers, body } as RouteInput<AnyObject, AnyObject, z.ZodType>);
    if (result !== undefined) ctx.body = result;
  };
}

export function mountRoutes(router: Router, routes: RouteDefinition[], authenticators: Authenticator[]): void {
  for (const route of routes) {
    const chain: Middleware[] = [];
    if (route.security?.length) chain.push(authorize(route, authenticators));
    chain.push(validateAndHandle(route));
    for (const template of [route.path, ...(route.aliases ?? [])]) {
      router.register(toRouterPath(template, route.wildcard), [route.method.toUpperCase()], chain as never, { name: route.operationId });
    }
  }
}
