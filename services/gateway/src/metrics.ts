import { Counter } from 'prom-client';
import { type Metrics, SeriesHistogram } from '@tempora/kit/observability';

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
    this.rateLimited = new Counter({ name: 'gateway_rate_limit_rejections_total', help: 'Requests refused with 429, by kind of window', labelNames: ['window'], registers });
    this.creditsCharged = new Counter({ name: 'gateway_credits_charged_total', help: 'Credits charged for proxied operations', labelNames: ['operation'], registers });
    this.creditsRefunded = new Counter({ name: 'gateway_credits_refunded_total', help: 'Credits refunded after an upstream failure', labelNames: ['operation'], registers });
    this.expressLane = new Counter({
      name: 'gateway_express_lane_requests_total',
      help: 'Proxied requests forwarded by the express lane (credential and rate-limit lease already known); the rest take the full middleware chain',
      registers,
    });
    this.signIns = new Counter({ name: 'gateway_sign_ins_total', help: 'Sign-in attempts by provider and outcome', labelNames: ['provider', 'outcome'], registers });
    this.tokenRefreshes = new Counter({
      name: 'gateway_token_refreshes_total',
      help: 'Refresh-token exchanges by outcome: rotated, replayed_in_grace, reuse_detected (the sign-in revoked), refused',
      labelNames: ['outcome'],
      registers,
    });
    this.apiKeys = new Counter({ name: 'gateway_api_keys_total', help: 'API keys created and revoked', labelNames: ['action'], registers });
    // Every outcome exists from the start at 0: a reuse detection is rare, and rate() of a missing series is no data.
    for (const outcome of ['rotated', 'replayed_in_grace', 'reuse_detected', 'refused']) this.tokenRefreshes.inc({ outcome }, 0);
    for (const action of ['created', 'revoked']) this.apiKeys.inc({ action }, 0);
  }
}
