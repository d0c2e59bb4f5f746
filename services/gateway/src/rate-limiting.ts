import type { Context } from 'koa';
import type { RateWindow } from '@tempora/kit/http';
import type { UserPrincipal } from './credentials.ts';
import { anonymousWindows, serviceWindows, tierWindows, type LimitSettings } from './domain/limits.ts';
import type { GatewayMetrics } from './metrics.ts';

/** A signed-in user's windows: their tier's, keyed by user or API key. */
export const userWindows = (user: UserPrincipal, settings: LimitSettings) => tierWindows(user.tier, user.id, settings);

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
