import type { IncomingMessage } from 'node:http';
import type { Readable } from 'node:stream';
import { bodyDigest, Problem, type ProxyTrust } from '@tempora/kit/http';
import type { Logger } from '@tempora/kit/observability';
import type { Context, Middleware } from 'koa';
import { Agent } from 'undici';
import type { ChargedJobs } from '../charged-jobs.ts';
import type { CallCharge, Credits } from '../domain/credits.ts';
import type { GatewayMetrics } from '../metrics.ts';
import { decide, type Forwarding } from './decision.ts';
import { type ClientRequest, headerValue, upstreamRequestFields } from './header-contract.ts';
import { readChargedBody } from './request-body.ts';
import { holdsForRender, PROXY_ROUTE, UPSTREAMS, type UpstreamName, type UpstreamTarget } from './routing.ts';
import { type CallDeps, UpstreamCall } from './upstream-call.ts';

export interface ProxySettings {
  upstreams: Record<UpstreamName, UpstreamTarget>;
  timeoutMs: number;
  /** The headers timeout of `POST /api/v1/timepoints/generate/sync` (holdsForRender). */
  syncGenerationTimeoutMs: number;
  bodyTimeoutMs: number;
  connectTimeoutMs: number;
  bodyLimitBytes: number;
  /** The proxies whose X-Forwarded-* fields describe the client (TRUSTED_PROXIES, the kit's one decision). */
  trust: ProxyTrust;
}

const hasBody = (req: IncomingMessage) =>
  req.method !== 'GET' && req.method !== 'HEAD' && (Boolean(req.headers['transfer-encoding']) || Number(req.headers['content-length'] || 0) > 0);

/**
 * Forwards requests to the backend services with undici, streaming bodies both ways. Chargeable calls are
 * read and decoded once (request-body.ts), priced from that JSON and charged before the decoded bytes are
 * forwarded, then refunded when the call does not deliver (upstream-call.ts says when).
 */
export class Proxy {
  private readonly settings: ProxySettings;
  private readonly agent: Agent;
  /** Each upstream's origin and base path, parsed once. */
  private readonly targets: Record<UpstreamName, { origin: string; basePath: string }>;
  private readonly credits: Credits;
  private readonly callDeps: CallDeps;

  constructor(settings: ProxySettings, credits: Credits, jobs: ChargedJobs, metrics: GatewayMetrics, logger: Logger) {
    this.settings = settings;
    this.credits = credits;
    this.targets = Object.fromEntries(
      UPSTREAMS.map((name) => {
        const url = new URL(settings.upstreams[name].url);
        return [name, { origin: url.origin, basePath: url.pathname.replace(/\/$/, '') }];
      }),
    ) as Record<UpstreamName, { origin: string; basePath: string }>;
    this.callDeps = {
      metrics,
      logger,
      chargedCallMaxMs: credits.times.callMaxMs,
      followJob: async (charge, upstream, path, location) => {
        const target = this.targets[upstream];
        const url = URL.parse(location, `${target.origin}${target.basePath}${path}`);
        if (url?.origin !== target.origin) {
          logger.warn({ upstream, path, location }, 'a charged call was accepted for later with a Location the gateway cannot follow; its charge stands');
          charge.deliver();
          return;
        }
        await jobs
          .follow(charge.userId, charge.key, upstream, `${url.pathname}${url.search}`)
          .catch((error: unknown) => logger.error({ err: error, charge: charge.key }, 'could not follow a charged job'));
      },
    };
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

  /** The Koa app's proxy: forwards what `decide` gives the proxy, refuses what it refuses, passes on the rest. */
  middleware(): Middleware {
    return async (ctx, next) => {
      const { user, principals } = ctx.state;
      const decision = decide(ctx.method, ctx.path, user, !user && (principals?.size ?? 0) > 0);
      if (decision === undefined) return next();
      if (decision instanceof Problem) throw decision;
      await this.forwardContext(ctx, decision);
    };
  }

  /** Proxies a request Koa took: labelled for the metrics, and no longer Koa's to answer once the upstream has. */
  forwardContext(ctx: Context, forwarding: Forwarding, path = ctx.path): Promise<void> {
    (ctx as Context & { _matchedRoute?: string })._matchedRoute = PROXY_ROUTE[forwarding.upstream];
    const request: ClientRequest = { req: ctx.req, res: ctx.res, method: ctx.method, path, querystring: ctx.querystring, requestId: ctx.state.requestId };
    return this.forward(request, forwarding, () => {
      ctx.respond = false;
    });
  }

  /**
   * Proxies `request` as `forwarding` says, writing the answer straight into the client's response (no
   * intermediate stream, no buffering). `onAnswer` runs when the upstream's answer is about to be passed
   * on, from when the response is the proxy's own. A chargeable call is charged first (402 when the
   * balance is short).
   */
  async forward(request: ClientRequest, forwarding: Forwarding, onAnswer?: () => void): Promise<void> {
    const { req } = request;
    let body: Buffer | Readable | undefined = hasBody(req) ? req : undefined;
    let charge: CallCharge | undefined;
    if (forwarding.user && forwarding.chargeable) {
      const read = await readChargedBody(req, body !== undefined, this.settings.bodyLimitBytes);
      body = read.bytes.length > 0 ? read.bytes : undefined;
      const idempotencyKey = headerValue(req.headers['idempotency-key']) || undefined;
      charge = await this.credits.chargeCall(
        forwarding.user.userId,
        request.method,
        request.path,
        read.json,
        { path: request.path, request_id: request.requestId },
        idempotencyKey,
      );
    }
    return new Promise((resolve, reject) => {
      this.relay(request, forwarding, body, charge, onAnswer, (error) => (error === undefined ? resolve() : reject(error)));
    });
  }

  /**
   * `forward` for a call with nothing to charge, finishing through a callback rather than a promise: the
   * express lane's path (the microtask queue took 10–14 µs per request in a CPU profile, 1.5 µs after;
   * bench/gateway/README.md, 2026-11-22).
   */
  pass(request: ClientRequest, forwarding: Forwarding, done: (error?: unknown) => void): void {
    this.relay(request, forwarding, hasBody(request.req) ? request.req : undefined, undefined, undefined, done);
  }

  private relay(
    request: ClientRequest,
    forwarding: Forwarding,
    body: Buffer | Readable | undefined,
    charge: CallCharge | undefined,
    onAnswer: (() => void) | undefined,
    done: (error?: unknown) => void,
  ): void {
    const { upstream, user } = forwarding;
    const target = this.targets[upstream];
    const priced = charge && {
      operation: charge.price.operation,
      method: request.method,
      path: `${target.basePath}${request.path}`,
      bodyDigest: bodyDigest(Buffer.isBuffer(body) ? body : Buffer.alloc(0)),
    };
    const identity = { user, serviceKey: this.settings.upstreams[upstream].serviceKey, trust: this.settings.trust, priced };
    const headers = upstreamRequestFields(request, identity, charge ? ((body as Buffer | undefined)?.length ?? 0) : undefined);
    const headersTimeout = holdsForRender(upstream, request.method, request.path) ? this.settings.syncGenerationTimeoutMs : this.settings.timeoutMs;
    const handler = new UpstreamCall(this.callDeps, { request, upstream, user, charge, headersTimeout, onAnswer, done });
    this.agent.dispatch(
      {
        origin: target.origin,
        path: `${target.basePath}${request.path}${request.querystring ? `?${request.querystring}` : ''}`,
        method: request.method as 'GET',
        headers,
        body,
        headersTimeout,
      },
      handler,
    );
  }
}
