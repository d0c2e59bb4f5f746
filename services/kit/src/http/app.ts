import { METHODS } from 'node:http';
import Router from '@koa/router';
import Koa from 'koa';
import { Gauge } from 'prom-client';
import type { Logger } from '../observability/logger.ts';
import type { Metrics } from '../observability/metrics.ts';
import type { BaseConfig, ServiceName } from '../runtime/config.ts';
import type { Authenticator } from './auth.ts';
import { createClientAddress } from './client-address.ts';
import { corsForDomain } from './cors.ts';
import { refuseRepeatedCredentials } from './credential-headers.ts';
import { problemMiddleware } from './errors.ts';
import { jsonBody } from './json-body.ts';
import { buildOpenApi, docsRouter } from './openapi.ts';
import type { RateLimiter, WindowResolver } from './rate-limit.ts';
import { requestId } from './request-id.ts';
import { identify, mountRoutes, type RouteDefinition, refuseInvalidCredentials, STRICT_PATHS } from './routes.ts';

export interface HealthReport {
  status: 'ok' | 'degraded';
  [field: string]: unknown;
}

export interface ServiceDefinition {
  name: ServiceName;
  version: string;
  title: string;
  description: string;
  config: Pick<BaseConfig, 'TEMPORA_DOMAIN' | 'BODY_LIMIT' | 'TRUSTED_PROXIES' | 'TRUSTED_PROXY_HOPS'>;
  logger: Logger;
  metrics: Metrics;
  authenticators: Authenticator[];
  /**
   * Replaces identification by `authenticators` when it needs I/O (the gateway's access tokens and API
   * keys). Like `identify`, it sets `ctx.state.principals` and `principal`, and leaves a refused credential
   * in `ctx.state.credentialProblem` for after rate limiting.
   */
  identify?: Koa.Middleware;
  rateLimit?: { limiter: RateLimiter; windows: WindowResolver; onLimited?: (ctx: Koa.Context, refusedBy: string) => void };
  /** Run after credentials are checked and before the body is parsed: whatever must stream the raw body (a proxy). */
  beforeBody?: Koa.Middleware[];
  /** Run before CORS preflights and the operational and documentation routes are answered (the gateway reports its rate-limit state on those too). */
  beforeOperations?: Koa.Middleware[];
  routes: RouteDefinition[];
  /** Extra health fields; `status: degraded` answers 503 so orchestrators stop routing here. */
  health(): Promise<HealthReport>;
  /** Routes outside the OpenAPI document (e.g. MCP), mounted behind identification and rate limits. */
  extend?(router: Router): void;
}

export interface ServiceApp {
  app: Koa;
  openapi: object;
  /** Called when shutdown begins: /health answers 503 so load balancers stop sending traffic. */
  drain(): void;
}

export function createApp(definition: ServiceDefinition): ServiceApp {
  // Koa's own proxy trust (any peer's X-Forwarded-*) stays off: ctx.ip is set from createClientAddress.
  const app = new Koa();
  const clientAddress = createClientAddress(definition.config);
  let draining = false;
  const openapi = buildOpenApi({ title: definition.title, version: definition.version, description: definition.description }, definition.routes);

  const operations = new Router(STRICT_PATHS);
  operations.get('/health', async (ctx) => {
    if (draining) {
      ctx.status = 503;
      ctx.body = { status: 'draining', service: definition.name, version: definition.version };
      return;
    }
    const report = await definition.health();
    ctx.status = report.status === 'ok' ? 200 : 503;
    ctx.body = { ...report, service: definition.name, version: definition.version };
  });
  const docs = docsRouter(openapi, definition.title);

  // Every method counts as implemented, so one no route takes (TRACE, QUERY) is a 405 naming the allowed ones, not a 501.
  const api = new Router({ ...STRICT_PATHS, methods: METHODS });
  definition.extend?.(api);
  mountRoutes(api, definition.routes, definition.authenticators);

  if (definition.rateLimit) {
    const { limiter } = definition.rateLimit;
    new Gauge({
      name: 'rate_limiter_memory_fallback',
      help: '1 while Redis is configured but unreachable and the rate limits are counted in this process alone (each replica then admits up to the whole limit)',
      registers: [definition.metrics.registry],
      collect() {
        this.set(limiter.fallenBackToMemory ? 1 : 0);
      },
    });
  }

  app.use((ctx, next) => {
    ctx.request.ip = clientAddress(ctx.req);
    return next();
  });
  app.use(requestId);
  app.use(definition.metrics.middleware());
  app.use(problemMiddleware(definition.logger));
  app.use(refuseRepeatedCredentials);
  for (const middleware of definition.beforeOperations ?? []) app.use(middleware);
  app.use(corsForDomain(definition.config.TEMPORA_DOMAIN));
  // The operational and documentation routes live outside /api/, so API requests skip their routers.
  const outsideApi =
    (middleware: Koa.Middleware): Koa.Middleware =>
    (ctx, next) =>
      ctx.path.startsWith('/api/') ? next() : middleware(ctx, next);
  app.use(outsideApi(operations.routes() as Koa.Middleware));
  app.use(outsideApi(docs.routes() as Koa.Middleware));
  app.use(definition.identify ?? identify(definition.authenticators));
  if (definition.rateLimit) app.use(definition.rateLimit.limiter.middleware(definition.rateLimit.windows, definition.rateLimit.onLimited));
  app.use(refuseInvalidCredentials);
  for (const middleware of definition.beforeBody ?? []) app.use(middleware);
  app.use(jsonBody(definition.config.BODY_LIMIT));
  app.use(api.routes());
  app.use(api.allowedMethods());

  return {
    app,
    openapi,
    drain: () => {
      draining = true;
    },
  };
}
