import type { Context, Middleware } from 'koa';
import type { RateLimiter, RateWindow } from '@tempora/kit/http';
import type { Logger } from '@tempora/kit/observability';
import type { Authentication, UserPrincipal } from './credentials.ts';
import { anonymousWindows, serviceWindows, tierWindows, type LimitSettings } from './domain/limits.ts';
import type { GatewayMetrics } from './metrics.ts';

/**
 * A signed-in user's windows: their tier's, keyed by the account, so every credential of it (each token,
 * each API key) spends the same minute and day.
 */
export const userWindows = (user: UserPrincipal, settings: LimitSettings) => tierWindows(user.tier, `user:${user.userId}`, settings);

/** Which windows a request counts against: its user's tier, its service, or its address. */
export function gatewayWindows(settings: LimitSettings) {
  return (ctx: Context): RateWindow[] => {
    const { user, principals } = ctx.state;
    if (user) return userWindows(user, settings);
    const principal = principals?.values().next().value;
    if (principal) return serviceWindows(principal.id, settings);
    return anonymousWindows(ctx.ip, settings);
  };
}

/** Counts a refusal by kind of window: `tier-<tier>` for a user's minute, else the window's name. */
export function countRejection(metrics: GatewayMetrics) {
  return (windows: RateWindow[], user: UserPrincipal | undefined) =>
    metrics.rateLimited.inc({ window: windows[0]?.name === 'tier-minute' && user ? `tier-${user.tier}` : (windows[0]?.name ?? 'unknown') });
}

/** The operational and documentation routes: never refused, so probes and scrapes always answer, and not counted. */
const UNCOUNTED = /^\/(health|metrics|openapi\.json|docs|redoc)(\/|$)/;

/**
 * Reports the caller's rate-limit state on the answers that are never refused nor counted (the spec asks
 * for it on every response): `/health`, `/metrics`, the documentation, and CORS preflights. The caller is
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
