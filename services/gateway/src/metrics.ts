import { generationOperation, simulationOperation } from '@tempora/kit/http';
import { type Metrics, SeriesHistogram, zeroed } from '@tempora/kit/observability';
import { Counter } from 'prom-client';
import { GENERATION_PRESET_COSTS, SIMULATION_FIDELITY_COSTS } from './domain/costs.ts';
import { TIERS } from './domain/limits.ts';
import type { ProviderName } from './domain/providers.ts';
import type { RefreshOutcome } from './domain/tokens.ts';

/** The windows a refusal is counted under (rate-limiting.ts, `countRejection`): a tier's minute by its tier. */
export const REJECTION_WINDOWS = [
  ...TIERS.map((tier) => `tier-${tier}`),
  'tier-day',
  'authenticated-reads',
  'authenticated-writes',
  'anonymous',
  'service',
  'demo-signin',
];
/** The operations the proxy prices (domain/costs.ts); a service's own charges may name others, counted when they happen. */
export const PRICED_OPERATIONS = [
  ...Object.keys(GENERATION_PRESET_COSTS).flatMap((preset) => [generationOperation(preset, false), generationOperation(preset, true)]),
  ...Object.keys(SIMULATION_FIDELITY_COSTS).map((fidelity) => simulationOperation(Number(fidelity))),
];
const SIGN_IN_PROVIDERS: readonly ProviderName[] = ['apple', 'google', 'github'];
const REFRESH_OUTCOMES: readonly RefreshOutcome[] = ['rotated', 'replayed_in_grace', 'reuse_detected', 'refused'];

/** The gateway's own series, beside the kit's request histogram (requests by route and status). */
export class GatewayMetrics {
  readonly upstreamDuration: SeriesHistogram<'upstream' | 'status'>;
  readonly rateLimited: Counter<'window'>;
  readonly creditsCharged: Counter<'operation'>;
  readonly creditsRefunded: Counter<'operation'>;
  readonly signIns: Counter<'provider' | 'outcome'>;
  readonly tokenRefreshes: Counter<'outcome'>;
  readonly apiKeys: Counter<'action'>;
  readonly expressLane: Counter;

  constructor(metrics: Metrics) {
    const registers = [metrics.registry];
    this.upstreamDuration = new SeriesHistogram({
      name: 'gateway_upstream_duration_seconds',
      help: 'Time until an upstream answered with headers, by upstream and status (error: no answer)',
      labelNames: ['upstream', 'status'],
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120],
      registers,
    });
    this.rateLimited = new Counter({
      name: 'gateway_rate_limit_rejections_total',
      help: 'Requests refused with 429, by kind of window',
      labelNames: ['window'],
      registers,
    });
    this.creditsCharged = new Counter({
      name: 'gateway_credits_charged_total',
      help: 'Credits charged for proxied operations',
      labelNames: ['operation'],
      registers,
    });
    this.creditsRefunded = new Counter({
      name: 'gateway_credits_refunded_total',
      help: 'Credits refunded after an upstream failure',
      labelNames: ['operation'],
      registers,
    });
    this.expressLane = new Counter({
      name: 'gateway_express_lane_requests_total',
      help: 'Proxied requests forwarded by the express lane (credential and rate-limit lease already known); the rest take the full middleware chain',
      registers,
    });
    this.signIns = new Counter({
      name: 'gateway_sign_ins_total',
      help: 'Sign-in attempts by provider and outcome',
      labelNames: ['provider', 'outcome'],
      registers,
    });
    this.tokenRefreshes = new Counter({
      name: 'gateway_token_refreshes_total',
      help: 'Refresh-token exchanges by outcome: rotated, replayed_in_grace, reuse_detected (the sign-in revoked), refused',
      labelNames: ['outcome'],
      registers,
    });
    this.apiKeys = new Counter({ name: 'gateway_api_keys_total', help: 'API keys created and revoked', labelNames: ['action'], registers });
    // What can be counted is exported from the start at 0: a refusal, a refund or a reuse detection is rare,
    // and rate() of a series not yet exported is no data, not "none". Upstream statuses are left to traffic.
    zeroed(this.rateLimited, { window: REJECTION_WINDOWS });
    zeroed(this.creditsCharged, { operation: PRICED_OPERATIONS });
    zeroed(this.creditsRefunded, { operation: PRICED_OPERATIONS });
    // A provider's sign-in is new or returning, refused (401) or failed; a demo sign-in is always new.
    zeroed(this.signIns, { provider: SIGN_IN_PROVIDERS, outcome: ['signup', 'signin', 'refused', 'error'] }, { provider: ['demo'], outcome: ['signup'] });
    zeroed(this.tokenRefreshes, { outcome: REFRESH_OUTCOMES });
    zeroed(this.apiKeys, { action: ['created', 'revoked'] });
  }
}
