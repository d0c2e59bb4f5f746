import type { RateWindow } from '@tempora/kit/http';

/** An account's tier: what it may do per minute and per day (set by billing or an admin). */
export const TIERS = ['free', 'pro', 'enterprise'] as const;
export type Tier = (typeof TIERS)[number];

/** The gateway tiers (spec "Rate limits, by gateway tier"): both windows apply to every request. */
export const TIER_LIMITS: Record<Tier, { perMinute: number; perDay: number }> = {
  free: { perMinute: 10, perDay: 100 },
  pro: { perMinute: 60, perDay: 1_000 },
  enterprise: { perMinute: 300, perDay: 10_000 },
};

export interface LimitSettings {
  multiplier: number;
  anonymousPerMinute: number;
  servicePerMinute: number;
  /** The tiers' limits as configured (RATE_LIMIT_TIERS); TIER_LIMITS where unset. */
  tiers?: Record<Tier, { perMinute: number; perDay: number }>;
}

const scaled = (points: number, multiplier: number) => Math.max(1, Math.round(points * multiplier));

/** The windows of an account of `tier`, keyed by `subject` (user:<id>). */
export function tierWindows(tier: Tier, subject: string, settings: LimitSettings): RateWindow[] {
  const limits = (settings.tiers ?? TIER_LIMITS)[tier];
  return [
    { name: 'tier-minute', points: scaled(limits.perMinute, settings.multiplier), durationSeconds: 60, key: subject },
    { name: 'tier-day', points: scaled(limits.perDay, settings.multiplier), durationSeconds: 86_400, key: subject },
  ];
}

export const anonymousWindows = (ip: string, settings: LimitSettings): RateWindow[] => [
  { name: 'anonymous', points: scaled(settings.anonymousPerMinute, settings.multiplier), durationSeconds: 60, key: `ip:${ip}` },
];

export const serviceWindows = (principalId: string, settings: LimitSettings): RateWindow[] => [
  { name: 'service', points: scaled(settings.servicePerMinute, settings.multiplier), durationSeconds: 60, key: principalId },
];

/** Demo sign-ins per hour: from any address, and from a loopback one (a developer's own machine) when set apart. */
export interface DemoLimits {
  perHour: number;
  loopbackPerHour: number | undefined;
}

/** 127.0.0.0/8 and ::1, also as IPv4-mapped IPv6 addresses. */
const isLoopback = (ip: string) => ip === '::1' || /^(::ffff:)?127\./i.test(ip);

/**
 * Demo sign-ins per IP per hour, on top of the anonymous window: each creates an account with free
 * credits, so an address may make a few. A loopback address gets its own limit when one is set
 * (`npm start` raises it: a developer's machine has nothing to protect from its own tour).
 */
export function demoWindow(ip: string, limits: DemoLimits): RateWindow {
  const points = isLoopback(ip) && limits.loopbackPerHour !== undefined ? limits.loopbackPerHour : limits.perHour;
  return { name: 'demo-signin', points, durationSeconds: 3_600, key: `ip:${ip}` };
}
