import type { RateLimiter, RateWindow } from '@tempora/kit/http';
import type { Logger } from '@tempora/kit/observability';
import type { Context, Middleware } from 'koa';
import type { Authentication, UserPrincipal } from './credentials.ts';
import { type AccessKind, accountWindows, anonymousWindows, type LimitSettings, serviceWindows } from './domain/limits.ts';
import type { GatewayMetrics } from './metrics.ts';
import { isOpen, readsOnly, routeOf } from './proxy/routing.ts';

/** What a request is for the limits of a signed-in account (domain/limits.ts, `accountWindows`). */
export function accessKind(method: string, path: string): AccessKind {
  const upstream = routeOf(path);
  if (upstream !== undefined && upstream !== 'native' && isOpen(upstream, method, path)) return 'public-read';
  return readsOnly(method, path) ? 'read' : 'write';
}

/**
 * A signed-in user's windows for a request, keyed by the account, so every credential of it (each token,
 * each API key) spends the same windows.
 */
export const userWindows = (user: UserPrincipal, kind: AccessKind, settings: LimitSettings) => accountWindows(user.tier, `user:${user.userId}`, kind, settings);

/** Which windows a request counts against: its user's, its service's, or its address's. */
export function gatewayWindows(settings: LimitSettings) {
  return (ctx: Context): RateWindow[] => {
    const { user, principals } = ctx.state;
    if (user) return userWindows(user, accessKind(ctx.method, ctx.path), settings);
    const principal = principals?.values().next().value;
    if (principal) return serviceWindows(principal.id, settings);
    return anonymousWindows(ctx.ip, settings);
  };
}

/** Counts a refusal by the window that refused: `tier-<tier>` for a tier's minute, else the window's name. */
export function countRejection(metrics: GatewayMetrics) {
  return (refusedBy: string, user: UserPrincipal | undefined) =>
    metrics.rateLimited.inc({ window: refusedBy === 'tier-minute' && user ? `tier-${user.tier}` : refusedBy });
}

/** The operational and documentation routes: never refused, so probes always answer, and not counted. */
const UNCOUNTED = /^\/(health|openapi\.json|docs|redoc)(\/|$)/;

/**
 * Reports the caller's rate-limit state on the answers that are never refused nor counted (the spec asks
 * for it on every response): `/health`, the documentation, and CORS preflights. The caller is
 * identified as for any request, and its windows are read, not spent. Runs before those answers, so
 * before the app's own identification; a failure here costs the headers, never the answer.
 */
export function reportUncounted(authentication: Authentication, limiter: RateLimiter, windows: (ctx: Context) => RateWindow[], logger: Logger): Middleware {
  return async (ctx, next) => {
    const read = (ctx.method === 'GET' || ctx.method === 'HEAD') && UNCOUNTED.test(ctx.path);
    const preflight = ctx.method === 'OPTIONS' && ctx.get('Origin') !== '' && ctx.get('Access-Control-Request-Method') !== '';
    if (read || preflight) {
      try {
        await authentication.middleware(ctx, async () => {});
        ctx.set(await limiter.peek(windows(ctx)));
      } catch (error) {
        logger.warn({ err: error, path: ctx.path }, 'rate-limit state not reported');
      }
    }
    await next();
  };
}
