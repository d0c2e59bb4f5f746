import { randomUUID } from 'node:crypto';
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import type { Readable } from 'node:stream';
import { Agent, errors as undiciErrors, type Dispatcher } from 'undici';
import { context as otelContext, propagation } from '@opentelemetry/api';
import { Problem } from '@tempora/kit/http';
import { type Logger, randomHex } from '@tempora/kit/observability';
import type { Context } from 'koa';
import type { UserPrincipal } from './auth.ts';
import { isChargeable, priceOf, type PricedOperation } from './domain/costs.ts';
import type { GatewayMetrics } from './metrics.ts';
import { InsufficientCredits, type GatewayRepository } from './repository.ts';

export const UPSTREAMS = ['generation', 'graph', 'billing', 'simulation', 'conductor'] as const;
export type UpstreamName = (typeof UPSTREAMS)[number];

/** The route label of proxied requests in the request metrics, per upstream. */
export const PROXY_ROUTE = Object.fromEntries(UPSTREAMS.map((name) => [name, `proxy:${name}`])) as Record<UpstreamName, string>;

const NATIVE_PREFIXES = ['/api/v1/auth', '/api/v1/users', '/api/v1/credits'];
/** `path` is `prefix` or below it (checked in place: this runs for every proxied request). */
const under = (path: string, prefix: string) => path.startsWith(prefix) && (path.length === prefix.length || path.charCodeAt(prefix.length) === 0x2f);

/** The routing table: undefined outside /api/v1/, `native` for the gateway's own paths, else the upstream. */
export function routeOf(path: string): UpstreamName | 'native' | undefined {
  if (!path.startsWith('/api/v1/')) return undefined;
  for (const prefix of NATIVE_PREFIXES) if (under(path, prefix)) return 'native';
  if (under(path, '/api/v1/graph')) return 'graph';
  if (under(path, '/api/v1/billing')) return 'billing';
  if (under(path, '/api/v1/simulate') || under(path, '/api/v1/simulations')) return 'simulation';
  if (under(path, '/api/v1/conductor')) return 'conductor';
  return 'generation';
}

/** RFC 9110 §7.6.1 hop-by-hop fields, plus the legacy ones proxies still see. */
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-authenticate', 'proxy-authorization', 'te', 'trailer', 'trailers', 'transfer-encoding', 'upgrade', 'proxy-connection']);
/** Request fields that never leave the gateway: credentials, identity claims only the gateway may assert, and fields it sets itself. */
const STRIPPED_REQUEST = new Set(['host', 'authorization', 'cookie', 'x-api-key', 'x-admin-key', 'x-service-key', 'x-user-id', 'x-user-tier', 'x-request-id', 'traceparent', 'tracestate', 'expect', 'x-forwarded-for', 'x-forwarded-host', 'x-forwarded-proto']);
/** Response fields the gateway owns: its rate-limit state, its CORS policy, its request id. */
const STRIPPED_RESPONSE = /^(x-ratelimit-|access-control-|x-request-id$|x-credits-|x-balance-after$|retry-after$)/i;

const NO_TOKENS: ReadonlySet<string> = new Set();

/** The fields a Connection header names as hop-by-hop (RFC 9110 §7.6.1); none for the usual `keep-alive`. */
function connectionTokens(headers: IncomingHttpHeaders | Record<string, string | string[] | undefined>): ReadonlySet<string> {
  const value = headers.connection;
  if (value === undefined || value === 'keep-alive' || value === 'close') return NO_TOKENS;
  const list = Array.isArray(value) ? value.join(',') : value;
  return new Set(list.split(',').map((token) => token.trim().toLowerCase()).filter(Boolean));
}

/** `compute` remembered per field name (up to a bound): names repeat across answers and answer the same every time. */
function perName<T>(compute: (name: string) => T): (name: string) => T {
  const known = new Map<string, T>();
  return (name) => {
    let value = known.get(name);
    if (value === undefined) {
      value = compute(name);
      if (known.size < 1_000) known.set(name, value);
    }
    return value;
  };
}

/** Whether an upstream response field of this (lower-case) name may reach the client at all: not hop-by-hop, not the gateway's. */
const passable = perName((name) => !HOP_BY_HOP.has(name) && !STRIPPED_RESPONSE.test(name));

/**
 * For a field name the gateway sets itself: its lower-case form when the upstream's field of that name
 * wins (Vary), '' when the field is the gateway's alone (request id, rate limits), which is then never
 * looked up in the upstream's answer.
 */
const overridableAs = perName((name) => {
  const lower = name.toLowerCase();
  return passable(lower) ? lower : '';
});

/** Appends a field to a flat [name, value, name, value, ...] list, repeated fields as repeated pairs. */
function pushField(fields: string[], name: string, value: string | string[]): void {
  if (typeof value === 'string') fields.push(name, value);
  else for (const v of value) fields.push(name, v);
}

const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

/** A request header's value as one string ('' when absent): Node gives repeated fields as arrays. */
export const headerValue = (value: string | string[] | undefined) => (Array.isArray(value) ? value[0] : value) ?? '';

/** W3C trace context for the upstream call: OpenTelemetry's when tracing runs, else continued from the caller's. */
export function outgoingTraceContext(incomingHeaders: IncomingHttpHeaders): Record<string, string> {
  const carrier: Record<string, string> = {};
  propagation.inject(otelContext.active(), carrier);
  if (carrier.traceparent) return carrier;
  const incoming = TRACEPARENT.exec(headerValue(incomingHeaders.traceparent));
  const continued = incoming && !/^0+$/.test(incoming[1]!) ? incoming[1]! : undefined;
  // One draw for both ids when the trace is new.
  const ids = randomHex(continued ? 8 : 24);
  const traceparent = continued ? `00-${continued}-${ids}-${incoming![3]}` : `00-${ids.slice(16)}-${ids.slice(0, 16)}-${incoming?.[3] ?? '01'}`;
  const tracestate = incoming ? headerValue(incomingHeaders.tracestate) : '';
  return tracestate ? { traceparent, tracestate } : { traceparent };
}

/** What the proxy needs of a client's request, whichever server took it (Koa, or the express lane). */
export interface ClientRequest {
  req: IncomingMessage;
  res: ServerResponse;
  method: string;
  path: string;
  /** The query string without its '?'. */
  querystring: string;
  requestId: string;
  /**
   * Fields the response must carry besides the upstream's, as a flat [name, value, ...] list. The express
   * lane passes its own here rather than through setHeader, so Node writes the head straight from one list.
   */
  responseFields?: string[];
}

/** The first value of a comma-separated list field, trimmed. */
function firstListed(value: string | string[] | undefined): string {
  const list = headerValue(value);
  const comma = list.indexOf(',');
  return (comma < 0 ? list : list.slice(0, comma)).trim();
}

/**
 * The scheme and host the client used, as Koa reads them: X-Forwarded-Proto and X-Forwarded-Host count
 * only behind trusted proxies (TRUSTED_PROXY_HOPS).
 */
export function clientOrigin(req: IncomingMessage, trustProxy: boolean): { protocol: string; host: string } {
  const forwardedProto = trustProxy ? firstListed(req.headers['x-forwarded-proto']) : '';
  const protocol = (req.socket as { encrypted?: boolean }).encrypted ? 'https' : forwardedProto ? forwardedProto.toLowerCase() : 'http';
  let host = (trustProxy && firstListed(req.headers['x-forwarded-host'])) || firstListed(req.headers.host);
  if (host.includes('@')) {
    try {
      host = new URL(`http://${host}`).host;
    } catch {
      host = '';
    }
  }
  return { protocol, host };
}

export interface UpstreamTarget {
  url: string;
  serviceKey: string | undefined;
}

export interface ProxySettings {
  upstreams: Record<UpstreamName, UpstreamTarget>;
  timeoutMs: number;
  bodyTimeoutMs: number;
  connectTimeoutMs: number;
  bodyLimitBytes: number;
  /** Behind trusted proxies (TRUSTED_PROXY_HOPS > 0): their X-Forwarded-* fields describe the client. */
  trustProxy: boolean;
}

async function readLimited(stream: Readable, limit: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of stream) {
    size += (chunk as Buffer).length;
    if (size > limit) throw new Problem(413, 'request body exceeds the size limit');
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}

interface Charge {
  key: string;
  price: PricedOperation;
  balance: number;
}

const hasBody = (req: IncomingMessage) => req.method !== 'GET' && req.method !== 'HEAD' && (Boolean(req.headers['transfer-encoding']) || Number(req.headers['content-length'] || 0) > 0);

/**
 * The upstream's status and headers, less what the gateway owns, plus the credit headers and the
 * request's `responseFields`, written as one list: with no field set before (the express lane), Node
 * writes the head straight from it; otherwise (Koa) it merges the list into the fields already set.
 */
function writeAnswerHead(
  request: ClientRequest,
  statusCode: number,
  upstreamHeaders: IncomingHttpHeaders,
  credits: { charged: number; balance: number | undefined } | undefined,
): void {
  const dropped = connectionTokens(upstreamHeaders);
  const fields: string[] = [];
  // As with fields set before (Koa), a field the upstream may send (Vary) wins over the gateway's value;
  // the ones the gateway owns (request id, rate limits) are never the upstream's.
  const own = request.responseFields ?? [];
  for (let i = 0; i < own.length; i += 2) {
    const lower = overridableAs(own[i]!);
    if (lower && upstreamHeaders[lower] !== undefined && !dropped.has(lower)) continue;
    fields.push(own[i]!, own[i + 1]!);
  }
  for (const name in upstreamHeaders) {
    const value = upstreamHeaders[name];
    if (value !== undefined && passable(name) && !dropped.has(name)) pushField(fields, name, value);
  }
  if (credits) {
    fields.push('X-Credits-Charged', String(credits.charged));
    if (credits.balance !== undefined) fields.push('X-Balance-After', String(credits.balance));
  }
  const { res } = request;
  res.writeHead(statusCode, fields);
  // A body of known length carries the head in its first write; a stream (SSE) shows its head at once.
  if (upstreamHeaders['content-length'] === undefined) res.flushHeaders();
}

/**
 * Forwards requests to the backend services with undici, streaming bodies both ways. Chargeable calls are
 * priced from their (small, JSON) body, charged before forwarding and refunded when the upstream fails.
 */
export class Proxy {
  private readonly settings: ProxySettings;
  private readonly agent: Agent;
  /** Each upstream's origin and base path, parsed once. */
  private readonly targets: Record<UpstreamName, { origin: string; basePath: string }>;
  private readonly repository: GatewayRepository;
  private readonly metrics: GatewayMetrics;
  private readonly logger: Logger;
  private readonly callDeps: CallDeps;

  constructor(settings: ProxySettings, repository: GatewayRepository, metrics: GatewayMetrics, logger: Logger) {
    this.settings = settings;
    this.repository = repository;
    this.metrics = metrics;
    this.logger = logger;
    this.targets = Object.fromEntries(
      UPSTREAMS.map((name) => {
        const url = new URL(settings.upstreams[name].url);
        return [name, { origin: url.origin, basePath: url.pathname.replace(/\/$/, '') }];
      }),
    ) as Record<UpstreamName, { origin: string; basePath: string }>;
    this.callDeps = { settings, metrics, logger, refund: (user, charge, reason) => this.refund(user, charge, reason) };
    this.agent = new Agent({
      connect: { timeout: settings.connectTimeoutMs },
      headersTimeout: settings.timeoutMs,
      bodyTimeout: settings.bodyTimeoutMs,
      keepAliveTimeout: 30_000,
      connections: 256,
      pipelining: 1,
    });
  }

  close(): Promise<void> {
    return this.agent.close();
  }

  /**
   * The upstream request's fields as a flat list (undici takes it as is, without building an object per
   * request). `bodyLength`: the body was read into memory (a charged call), and is sent with this length.
   */
  private requestHeaders(request: ClientRequest, upstream: UpstreamName, user: UserPrincipal | undefined, bodyLength: number | undefined): string[] {
    const incoming = request.req.headers;
    const dropped = connectionTokens(incoming);
    const fields: string[] = [];
    for (const name in incoming) {
      const value = incoming[name];
      if (value === undefined || HOP_BY_HOP.has(name) || STRIPPED_REQUEST.has(name) || dropped.has(name)) continue;
      if (bodyLength !== undefined && name === 'content-length') continue;
      pushField(fields, name, value);
    }
    if (bodyLength !== undefined) fields.push('content-length', String(bodyLength));
    const previous = headerValue(incoming['x-forwarded-for']);
    const peer = request.req.socket.remoteAddress ?? '';
    const origin = clientOrigin(request.req, this.settings.trustProxy);
    fields.push('x-forwarded-for', previous ? `${previous}, ${peer}` : peer, 'x-forwarded-proto', origin.protocol);
    if (origin.host) fields.push('x-forwarded-host', origin.host);
    fields.push('x-request-id', request.requestId);
    const trace = outgoingTraceContext(incoming);
    for (const name in trace) fields.push(name, trace[name]!);
    if (user) {
      fields.push('x-user-id', user.userId, 'x-user-tier', user.tier);
      const key = this.settings.upstreams[upstream].serviceKey;
      if (key) fields.push('x-service-key', key);
    }
    return fields;
  }

  /** The balance after refunding `charge`; undefined when the refund could not be booked (it is logged). */
  private async refund(user: UserPrincipal, charge: Charge, reason: string): Promise<number | undefined> {
    try {
      const outcome = await this.repository.refund(user.userId, charge.key, reason);
      if (outcome && !outcome.replayed) this.metrics.creditsRefunded.inc({ operation: charge.price.operation }, charge.price.amount);
      return outcome?.balance;
    } catch (error) {
      this.logger.error({ err: error, user: user.userId, charge: charge.key }, 'refund failed');
      return undefined;
    }
  }

  /** Prices a chargeable call from its (small, JSON) body and charges it; 402 when the balance is short. */
  private async charge(request: ClientRequest, user: UserPrincipal, raw: Buffer): Promise<Charge> {
    let parsed: unknown;
    try {
      parsed = raw.length > 0 ? JSON.parse(raw.toString('utf8')) : {};
    } catch {
      parsed = {};
    }
    const price = priceOf(request.method, request.path, parsed)!;
    const key = `proxy:${randomUUID()}`;
    try {
      const outcome = await this.repository.charge(user.userId, price.amount, key, price.operation, { path: request.path, request_id: request.requestId });
      this.metrics.creditsCharged.inc({ operation: price.operation }, price.amount);
      return { key, price, balance: outcome.balance };
    } catch (error) {
      if (error instanceof InsufficientCredits) {
        throw new Problem(402, `${price.operation} costs ${error.required} credits; the balance is ${error.available}`, {
          title: 'Insufficient credits',
          type: 'https://tempora.dev/problems/insufficient-credits',
          extensions: { required: error.required, available: error.available, operation: price.operation },
          headers: { 'X-Credits-Charged': '0', 'X-Balance-After': String(error.available) },
        });
      }
      throw error;
    }
  }

  /** Proxies a request Koa took: labelled for the metrics, and no longer Koa's to answer once the upstream has. */
  forwardContext(ctx: Context, upstream: UpstreamName, path: string, user: UserPrincipal | undefined): Promise<void> {
    (ctx as Context & { _matchedRoute?: string })._matchedRoute = PROXY_ROUTE[upstream];
    const request: ClientRequest = { req: ctx.req, res: ctx.res, method: ctx.method, path, querystring: ctx.querystring, requestId: String(ctx.state.requestId) };
    return this.forward(request, upstream, user, () => {
      ctx.respond = false;
    });
  }

  /**
   * Proxies `request` to `upstream` at its path (with its query string), writing the answer straight into
   * the client's response (no intermediate stream, no buffering). `onAnswer` runs when the upstream's
   * answer is about to be passed on, from when the response is the proxy's own. A chargeable call is
   * charged first (402 when the balance is short) and refunded when the upstream fails or refuses it.
   */
  async forward(request: ClientRequest, upstream: UpstreamName, user: UserPrincipal | undefined, onAnswer?: () => void): Promise<void> {
    const { req, path } = request;
    let body: Buffer | Readable | undefined = hasBody(req) ? req : undefined;
    let charge: Charge | undefined;
    if (user && isChargeable(request.method, path)) {
      const raw = body ? await readLimited(req, this.settings.bodyLimitBytes) : Buffer.alloc(0);
      body = raw.length > 0 ? raw : undefined;
      charge = await this.charge(request, user, raw);
    }
    return new Promise((resolve, reject) => {
      this.relay(request, upstream, user, { body, charge, onAnswer }, (error) => (error === undefined ? resolve() : reject(error)));
    });
  }

  /**
   * `forward` for a call with nothing to charge, finishing through a callback: the express lane's path,
   * without a promise to settle per request.
   */
  pass(request: ClientRequest, upstream: UpstreamName, user: UserPrincipal, done: (error?: unknown) => void): void {
    this.relay(request, upstream, user, { body: hasBody(request.req) ? request.req : undefined }, done);
  }

  private relay(
    request: ClientRequest,
    upstream: UpstreamName,
    user: UserPrincipal | undefined,
    call: { body: Buffer | Readable | undefined; charge?: Charge; onAnswer?: () => void },
    done: (error?: unknown) => void,
  ): void {
    const target = this.targets[upstream];
    const { body, charge } = call;
    const headers = this.requestHeaders(request, upstream, user, Buffer.isBuffer(body) ? body.length : undefined);
    const handler = new UpstreamCall(this.callDeps, request, upstream, user, charge, call.onAnswer, done);
    this.agent.dispatch(
      { origin: target.origin, path: `${target.basePath}${request.path}${request.querystring ? `?${request.querystring}` : ''}`, method: request.method as 'GET', headers, body },
      handler,
    );
  }
}

/** What an upstream call needs of its proxy. */
interface CallDeps {
  settings: ProxySettings;
  metrics: GatewayMetrics;
  logger: Logger;
  refund(user: UserPrincipal, charge: Charge, reason: string): Promise<number | undefined>;
}

/**
 * A charged call's answer the upstream refused, held until the refund is booked so that X-Balance-After
 * is the balance after it. Only its first HELD_BYTES wait in memory: past them the upstream is paused.
 */
interface HeldAnswer {
  statusCode: number;
  headers: IncomingHttpHeaders;
  chunks: Buffer[];
  size: number;
  /** The whole answer arrived. */
  complete: boolean;
  /** The refund's outcome, once booked: the balance after it, or undefined when it failed (it is logged). */
  refunded?: { balance: number | undefined };
}

/** A refusal is a short problem document; a longer one is passed on as a stream once the refund is booked. */
const HELD_BYTES = 64 * 1024;

/**
 * One proxied call in flight, as undici's dispatch handler: the upstream's answer is written straight into
 * the client's response, with backpressure both ways. One object per call holds what the higher-level
 * `stream()` spread over an async resource, stream listeners, an abort signal and a closure per step.
 */
class UpstreamCall implements Dispatcher.DispatchHandler {
  private readonly started = performance.now();
  private controller: Dispatcher.DispatchController | undefined;
  /** The upstream's head arrived: from then on the response is the proxy's own. */
  private answered = false;
  /** The client went away: the upstream call is cancelled (and a charge refunded if the answer had not started). */
  private abandoned = false;
  /** A refused charged answer not yet passed on. */
  private held: HeldAnswer | undefined;
  /** The refund of a refused charged call, booked once whatever happens next. */
  private refunding: Promise<number | undefined> | undefined;
  private readonly onClientGone = () => {
    if (this.request.res.writableFinished) return;
    this.abandoned = true;
    this.controller?.abort(new Error('the client closed the request'));
  };

  private readonly deps: CallDeps;
  private readonly request: ClientRequest;
  private readonly upstream: UpstreamName;
  private readonly user: UserPrincipal | undefined;
  private readonly charge: Charge | undefined;
  private readonly onAnswer: (() => void) | undefined;
  private readonly done: (error?: unknown) => void;

  constructor(deps: CallDeps, request: ClientRequest, upstream: UpstreamName, user: UserPrincipal | undefined, charge: Charge | undefined, onAnswer: (() => void) | undefined, done: (error?: unknown) => void) {
    this.deps = deps;
    this.request = request;
    this.upstream = upstream;
    this.user = user;
    this.charge = charge;
    this.onAnswer = onAnswer;
    this.done = done;
    request.res.on('close', this.onClientGone);
  }

  /** The balance the response reports when nothing is refunded. */
  private get balance(): number | undefined {
    return this.charge?.balance ?? (this.user ? Number(this.user.user.balance) : undefined);
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.controller = controller;
    if (this.abandoned) controller.abort(new Error('the client closed the request'));
  }

  onResponseStart(controller: Dispatcher.DispatchController, statusCode: number, headers: IncomingHttpHeaders): void {
    // Interim answers (100 Continue, 103 Early Hints) are not relayed: the final one follows.
    if (statusCode < 200) return;
    this.answered = true;
    this.deps.metrics.upstreamDuration.series(this.upstream, String(statusCode)).observe((performance.now() - this.started) / 1000);
    // A charged call the upstream refused is refunded before the client sees the head, so that
    // X-Balance-After is the balance after the refund: its body waits meanwhile.
    if (this.charge && statusCode >= 300) {
      const held: HeldAnswer = { statusCode, headers, chunks: [], size: 0, complete: false };
      this.held = held;
      this.refund(`upstream answered ${statusCode}`).then((balance) => {
        held.refunded = { balance };
        this.release(controller);
      });
      return;
    }
    this.onAnswer?.();
    writeAnswerHead(this.request, statusCode, headers, this.user ? { charged: this.charge?.price.amount ?? 0, balance: this.balance } : undefined);
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    const { held } = this;
    if (held) {
      held.chunks.push(chunk);
      held.size += chunk.length;
      if (held.size >= HELD_BYTES) controller.pause();
      return this.release(controller);
    }
    this.pass(controller, chunk);
  }

  onResponseEnd(controller: Dispatcher.DispatchController): void {
    this.request.res.off('close', this.onClientGone);
    if (this.held) {
      this.held.complete = true;
      return this.release(controller);
    }
    this.request.res.end();
    this.done();
  }

  onResponseError(_controller: Dispatcher.DispatchController | undefined, error: Error): void {
    this.request.res.off('close', this.onClientGone);
    this.failed(error).then(() => this.done(), this.done);
  }

  /** Writes a chunk of the answer, pausing the upstream while the client's socket is full. */
  private pass(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    const { res } = this.request;
    if (!res.write(chunk)) {
      controller.pause();
      res.once('drain', () => controller.resume());
    }
  }

  /** The refund of this call's charge, started once; undefined when it could not be booked. */
  private refund(reason: string): Promise<number | undefined> {
    this.refunding ??= this.deps.refund(this.user!, this.charge!, reason);
    return this.refunding;
  }

  /**
   * Passes a held refusal on once its refund is booked and either all of it arrived or it outgrew
   * HELD_BYTES (then the rest streams, the upstream resumed). Until then the client has seen nothing.
   */
  private release(controller: Dispatcher.DispatchController): void {
    const held = this.held;
    if (!held?.refunded || (!held.complete && held.size < HELD_BYTES)) return;
    this.held = undefined;
    const { balance } = held.refunded;
    const charge = this.charge!;
    this.onAnswer?.();
    writeAnswerHead(this.request, held.statusCode, held.headers, balance === undefined ? { charged: charge.price.amount, balance: charge.balance } : { charged: 0, balance });
    if (held.complete) {
      this.request.res.end(Buffer.concat(held.chunks));
      return this.done();
    }
    const { res } = this.request;
    for (const chunk of held.chunks) res.write(chunk);
    if (res.writableNeedDrain) res.once('drain', () => controller.resume());
    else controller.resume();
  }

  /** After a failed upstream call: what is left to tell the client (a 502, 504 or 499 problem), refunded when charged. */
  private async failed(error: Error): Promise<void> {
    const { request, upstream, user, charge, abandoned, deps } = this;
    const { res } = request;
    if (this.answered && !this.held) {
      // The head is out: all that is left is to cut the response short (and refund what was not delivered).
      if (charge && user && !abandoned) await this.refund('upstream stream failed');
      deps.logger.debug({ err: error, upstream }, 'proxied stream ended early');
      res.destroy();
      return;
    }
    // The client has seen nothing (no answer yet, or a refused one held back): it gets a problem, refunded.
    if (!this.answered) deps.metrics.upstreamDuration.series(upstream, 'error').observe((performance.now() - this.started) / 1000);
    this.held = undefined;
    const refunded = charge && user ? await this.refund(abandoned ? 'client went away' : 'upstream unavailable') : undefined;
    const creditHeaders: Record<string, string> = user ? { 'X-Credits-Charged': '0', 'X-Balance-After': String(refunded ?? this.balance) } : {};
    if (error instanceof undiciErrors.HeadersTimeoutError || error instanceof undiciErrors.BodyTimeoutError) {
      throw new Problem(504, `the ${upstream} service did not answer within ${Math.round(deps.settings.timeoutMs / 1000)} s`, { headers: creditHeaders });
    }
    // Also a client gone while the request waited in the gateway (e.g. during a shutdown's drain).
    if (abandoned || res.destroyed) {
      deps.logger.debug({ upstream }, 'client went away before the upstream answered');
      throw new Problem(499 as number, 'the client closed the request');
    }
    deps.logger.warn({ err: error, upstream }, 'upstream unreachable');
    throw new Problem(502, `the ${upstream} service could not be reached`, { headers: creditHeaders });
  }
}
