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
  /** The spec's "authenticated reads" and "authenticated writes" per minute, per account, whatever the tier. */
  authenticatedReadsPerMinute: number;
  authenticatedWritesPerMinute: number;
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

/**
 * What a signed-in request is, for its limits: a read anyone may make without a credential (the graph's
 * public reads and MCP read tools, public images), another read, or a write.
 */
export type AccessKind = 'public-read' | 'read' | 'write';

/**
 * The windows an account's request of `kind` spends (docs/gateway.md, "How the limits combine"). Every
 * read shares the account's authenticated-reads window and every write its authenticated-writes window,
 * whatever the tier; what is not a public read also spends the tier's minute and day. So signing in never
 * lowers a limit (a public read gets the reads window, above the anonymous 60 per minute, and no tier
 * window), and no tier writes more than the spec's 30 per minute.
 */
export function accountWindows(tier: Tier, subject: string, kind: AccessKind, settings: LimitSettings): RateWindow[] {
  const reads: RateWindow = {
    name: 'authenticated-reads',
    points: scaled(settings.authenticatedReadsPerMinute, settings.multiplier),
    durationSeconds: 60,
    key: subject,
  };
  if (kind === 'public-read') return [reads];
  const access: RateWindow =
    kind === 'read'
      ? reads
      : { name: 'authenticated-writes', points: scaled(settings.authenticatedWritesPerMinute, settings.multiplier), durationSeconds: 60, key: subject };
  return [access, ...tierWindows(tier, subject, settings)];
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
