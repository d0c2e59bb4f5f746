import { type Metrics, zeroed } from '@tempora/kit/observability';
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { PoolStats } from './pool/stats.ts';
import { PRESETS } from './schemas.ts';

const MODES = ['sync', 'stream', 'async'];
/** What a generation comes to (generator.ts). */
const OUTCOMES = ['completed', 'rejected', 'cancelled', 'failed'];

/** What the pool gauges read: the queue depth (also 0 in-process) and the pool's stats (none in-process). */
export interface PoolReadings {
  depth: () => Promise<number>;
  stats: () => Promise<PoolStats | undefined>;
}

/** Per-agent latency, tokens and errors by provider, fallbacks, whole runs, the agent pool, requests by outcome. */
export class GenerationMetrics {
  readonly agentDuration: Histogram<'agent' | 'provider' | 'status'>;
  readonly agentTokens: Counter<'agent' | 'provider' | 'direction'>;
  readonly agentErrors: Counter<'agent' | 'provider' | 'code'>;
  readonly providerFallbacks: Counter<'agent' | 'from' | 'to'>;
  readonly pipelineDuration: Histogram<'mode' | 'preset' | 'outcome'>;
  readonly requests: Counter<'mode' | 'outcome'>;
  readonly callbacks: Counter<'outcome'>;

  constructor(metrics: Metrics, readings: PoolReadings, pool: string) {
    const registers = [metrics.registry];
    this.agentDuration = new Histogram({
      name: 'generation_agent_duration_seconds',
      help: 'Duration of agent calls (model calls, repairs and retries included), by agent, provider and status',
      labelNames: ['agent', 'provider', 'status'],
      buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 40, 80],
      registers,
    });
    this.agentTokens = new Counter({
      name: 'generation_agent_tokens_total',
      help: 'Tokens used by agent calls, by agent, provider and direction (input, output)',
      labelNames: ['agent', 'provider', 'direction'],
      registers,
    });
    this.agentErrors = new Counter({
      name: 'generation_agent_errors_total',
      help: 'Failed agent calls, by agent, provider and error code',
      labelNames: ['agent', 'provider', 'code'],
      registers,
    });
    this.providerFallbacks = new Counter({
      name: 'generation_provider_fallbacks_total',
      help: 'Provider failures a fallback absorbed: the agent went on from one provider to the next (its failure is also in generation_agent_errors_total under the failed provider)',
      labelNames: ['agent', 'from', 'to'],
      registers,
    });
    this.pipelineDuration = new Histogram({
      name: 'generation_pipeline_duration_seconds',
      help: 'Duration of whole generations (graph lookup, every agent, the scene stored), sync, stream and async alike, by mode, preset and outcome',
      labelNames: ['mode', 'preset', 'outcome'],
      buckets: [1, 2.5, 5, 10, 15, 20, 30, 45, 60, 90, 120, 180, 240, 300, 420, 600],
      registers,
    });
    this.requests = new Counter({
      name: 'generation_requests_total',
      help: 'Generation requests, by mode (sync, stream, async) and outcome',
      labelNames: ['mode', 'outcome'],
      registers,
    });
    this.callbacks = new Counter({
      name: 'generation_callbacks_total',
      help: 'Callback deliveries, by outcome (delivered, retried, failed)',
      labelNames: ['outcome'],
      registers,
    });
    // Exported from the start at 0, so a rare outcome reads as "none" rather than no data. The agent series
    // stay for traffic to create: which providers serve which agents is the deployment's configuration.
    zeroed(this.requests, { mode: MODES, outcome: OUTCOMES });
    zeroed(this.pipelineDuration, { mode: MODES, preset: PRESETS, outcome: OUTCOMES });
    zeroed(this.callbacks, { outcome: ['delivered', 'retried', 'failed'] });
    registerPoolMetrics(registers, readings, pool);
  }
}

/** How long one scrape's pool readings are reused: every pool gauge is collected at once, from one set of Redis reads. */
const READINGS_TTL_MS = 1_000;

/**
 * The agent pool's gauges, exported by the service and by each worker (so every process of a pool reports the
 * same stream: dashboards take the max per pool). The queue depth goes out under our name and under the one
 * the operator's AgentPool HPA asks a metrics adapter for (crds/agentpool.yaml); the backlog's age and the
 * live workers come from the stream and its consumer group, so idle workers count too. A pool gauge that
 * cannot be read is left out of the scrape rather than reported as 0.
 */
export function registerPoolMetrics(registers: Registry[], readings: PoolReadings, pool: string): void {
  let cached: { at: number; stats: Promise<PoolStats | undefined> } | undefined;
  const stats = () => {
    if (!cached || Date.now() - cached.at > READINGS_TTL_MS) cached = { at: Date.now(), stats: readings.stats().catch(() => undefined) };
    return cached.stats;
  };
  const poolGauge = (name: string, help: string, read: (stats: PoolStats) => number) =>
    new Gauge({
      name,
      help,
      labelNames: ['pool'],
      registers,
      async collect() {
        const current = await stats();
        this.reset();
        if (current) this.set({ pool }, read(current));
      },
    });
  new Gauge({
    name: 'generation_agent_queue_depth',
    help: 'Agent tasks waiting or running on the Redis agent pool (the AgentPool autoscaling signal); 0 when agents run in-process',
    registers,
    async collect() {
      this.set(await readings.depth());
    },
  });
  // The AgentPool's HPA selects its pool's series by this label (AGENT_POOL_NAME, set by the operator).
  new Gauge({
    name: 'tempora_generation_queue_depth',
    help: 'Same as generation_agent_queue_depth, under the name and with the pool label the AgentPool autoscaler reads',
    labelNames: ['pool'],
    registers,
    async collect() {
      this.set({ pool }, await readings.depth());
    },
  });
  poolGauge('generation_agent_pool_waiting_tasks', 'Agent tasks on the Redis agent pool that no worker has picked up yet', (current) => current.waiting);
  poolGauge(
    'generation_agent_pool_oldest_task_age_seconds',
    "Age of the agent pool's oldest unfinished task (waiting or running), on Redis's clock; 0 when the pool is empty",
    (current) => current.oldestAgeSeconds,
  );
  poolGauge(
    'generation_agent_pool_workers',
    "Agent-pool workers alive in the pool's consumer group: read, claimed or heartbeat within AGENT_POOL_CLAIM_IDLE_MS, busy or idle",
    (current) => current.workers,
  );
}
