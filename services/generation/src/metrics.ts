import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { Metrics } from '@tempora/kit/observability';

/** Per-agent latency, tokens and errors by provider, the pool's queue depth, requests by outcome. */
export class GenerationMetrics {
  readonly agentDuration: Histogram<'agent' | 'provider' | 'status'>;
  readonly agentTokens: Counter<'agent' | 'provider' | 'direction'>;
  readonly agentErrors: Counter<'agent' | 'provider' | 'code'>;
  readonly requests: Counter<'mode' | 'outcome'>;
  readonly callbacks: Counter<'outcome'>;

  constructor(metrics: Metrics, depth: () => Promise<number>, pool: string) {
    const registers = [metrics.registry];
    this.agentDuration = new Histogram({
      name: 'generation_agent_duration_seconds',
      help: 'Duration of agent calls (model calls, repairs and retries included), by agent, provider and status',
      labelNames: ['agent', 'provider', 'status'],
      buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 40, 80],
      registers,
    });
    this.agentTokens = new Counter({ name: 'generation_agent_tokens_total', help: 'Tokens used by agent calls, by agent, provider and direction (input, output)', labelNames: ['agent', 'provider', 'direction'], registers });
    this.agentErrors = new Counter({ name: 'generation_agent_errors_total', help: 'Failed agent calls, by agent, provider and error code', labelNames: ['agent', 'provider', 'code'], registers });
    this.requests = new Counter({ name: 'generation_requests_total', help: 'Generation requests, by mode (sync, stream, async) and outcome', labelNames: ['mode', 'outcome'], registers });
    this.callbacks = new Counter({ name: 'generation_callbacks_total', help: 'Callback deliveries, by outcome (delivered, retried, failed)', labelNames: ['outcome'], registers });
    registerQueueDepth(registers, depth, pool);
  }
}

/**
 * The agent pool's queue depth (the AgentPool autoscaling signal), exported by the service and by each
 * worker under our name and under the one the operator's AgentPool HPA asks a metrics adapter for
 * (crds/agentpool.yaml).
 */
export function registerQueueDepth(registers: Registry[], depth: () => Promise<number>, pool: string): void {
  new Gauge({
    name: 'generation_agent_queue_depth',
    help: 'Agent tasks waiting or running on the Redis agent pool (the AgentPool autoscaling signal); 0 when agents run in-process',
    registers,
    async collect() {
      this.set(await depth());
    },
  });
  // The AgentPool's HPA selects its pool's series by this label (AGENT_POOL_NAME, set by the operator).
  new Gauge({
    name: 'tempora_generation_queue_depth',
    help: 'Same as generation_agent_queue_depth, under the name and with the pool label the AgentPool autoscaler reads',
    labelNames: ['pool'],
    registers,
    async collect() {
      this.set({ pool }, await depth());
    },
  });
}
