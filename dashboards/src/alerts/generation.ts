import { ofComponents } from '../components.ts';
import type { AlertRule } from './types.ts';

/** Agents run in the generation service or, with a pool, in its AgentPool's workers. */
const AGENTS = ofComponents('generation', 'agent-pool');

export const modelProviderFailing: AlertRule = {
  alert: 'TemporaModelProviderFailing',
  // A failure the image chain absorbed is an error of the provider it left and a call to it: the fallback
  // counter, relabelled by the provider it came from, adds those calls (its labels never equal the histogram's, so `or` keeps both).
  expr: `sum by (provider) (rate(generation_agent_errors_total{${AGENTS}}[5m])) / sum by (provider) (rate(generation_agent_duration_seconds_count{${AGENTS}}[5m]) or label_replace(rate(generation_provider_fallbacks_total{${AGENTS}}[5m]), "provider", "$1", "from", "(.+)")) > 0.1`,
  for: '10m',
  severity: 'warning',
  summary: 'A model provider fails agent calls.',
  description: "More than 10% of agent calls to {{ $labels.provider }} fail; the pipeline falls back where the spec's chains allow.",
  runbook: {
    meaning: 'A model vendor (native provider, aggregator or image vendor) answers errors, rate limits (429) or times out.',
    impact: 'Scenes take longer (fallbacks) or fail; failed generations are refunded.',
    diagnosis: [
      'Tempora / Generation, Agent failures by provider and code: 429 is quota, 401/403 a key, 5xx or timeout the vendor.',
      'Tempora / Generation, Provider fallbacks: failures the image chain absorbed (the scene still got an image from the next provider) count here too.',
    ],
    mitigation: [
      'Quota or key: renew it in the provider Secret; the pods read it on restart.',
      'Vendor outage: steer traffic with `model_policy`/preset defaults, or wait it out.',
    ],
  },
  tests: [
    {
      name: 'a fifth of aggregator calls fail',
      input: [
        {
          series: 'generation_agent_duration_seconds_count{tempora_component="generation", provider="openrouter", agent="scene", status="ok"}',
          values: '0+100x30',
        },
        { series: 'generation_agent_errors_total{tempora_component="generation", provider="openrouter", agent="scene", code="429"}', values: '0+20x30' },
      ],
      at: '20m',
      fires: [{ provider: 'openrouter' }],
    },
    {
      name: 'a few errors among many calls',
      input: [
        {
          series: 'generation_agent_duration_seconds_count{tempora_component="generation", provider="openrouter", agent="scene", status="ok"}',
          values: '0+100x30',
        },
        { series: 'generation_agent_errors_total{tempora_component="generation", provider="openrouter", agent="scene", code="429"}', values: '0+1x30' },
      ],
      at: '20m',
      fires: [],
    },
    {
      name: 'every native image call fails and the image vendor absorbs it',
      input: [
        {
          series: 'generation_agent_duration_seconds_count{tempora_component="generation", provider="image_vendor", agent="ImageGen", status="completed"}',
          values: '0+10x30',
        },
        {
          series: 'generation_provider_fallbacks_total{tempora_component="generation", agent="ImageGen", from="native", to="image_vendor"}',
          values: '0+10x30',
        },
        { series: 'generation_agent_errors_total{tempora_component="generation", provider="native", agent="ImageGen", code="http"}', values: '0+10x30' },
      ],
      at: '20m',
      fires: [{ provider: 'native' }],
    },
    {
      name: 'a rare native failure among many native calls, absorbed',
      input: [
        {
          series: 'generation_agent_duration_seconds_count{tempora_component="generation", provider="native", agent="ImageGen", status="completed"}',
          values: '0+100x30',
        },
        {
          series: 'generation_provider_fallbacks_total{tempora_component="generation", agent="ImageGen", from="native", to="image_vendor"}',
          values: '0+1x30',
        },
        { series: 'generation_agent_errors_total{tempora_component="generation", provider="native", agent="ImageGen", code="http"}', values: '0+1x30' },
      ],
      at: '20m',
      fires: [],
    },
  ],
};

export const agentPoolBacklog: AlertRule = {
  alert: 'TemporaAgentPoolBacklog',
  // Every process of a pool (the generation pods and its workers) reports the same stream's depth: max, per pool.
  expr: `max by (namespace, pool) (tempora_generation_queue_depth{${AGENTS}}) > 100`,
  for: '10m',
  severity: 'warning',
  summary: 'Agent tasks are piling up in an agent pool.',
  description: 'More than 100 agent tasks have waited on the agent pool {{ $labels.pool }} for 10 minutes: its workers cannot keep up.',
  runbook: {
    meaning: "The generation service puts agent tasks on the pool's Redis stream faster than the AgentPool's workers finish them.",
    impact: 'Scenes take longer; synchronous generations may time out.',
    diagnosis: [
      'Tempora / Generation: Queue depth by pool and agent latency; `kubectl get hpa` for the AgentPool (at its maximum?).',
      "The pool's worker pods: running and Ready? Their provider errors?",
    ],
    mitigation: ["Raise the AgentPool's `maxReplicas`, or fix the workers' provider errors that slow every task."],
  },
  tests: [
    {
      name: 'a backlog of 500 on one pool for a quarter hour, reported by two of its processes; another pool keeps up',
      input: [
        { series: 'tempora_generation_queue_depth{tempora_component="generation", pool="agents", instance="generation-0"}', values: '500x20' },
        { series: 'tempora_generation_queue_depth{tempora_component="agent-pool", pool="agents", instance="agents-0"}', values: '500x20' },
        { series: 'tempora_generation_queue_depth{tempora_component="agent-pool", pool="batch", instance="batch-0"}', values: '5x20' },
      ],
      at: '15m',
      fires: [{ pool: 'agents' }],
    },
    {
      name: 'short queues on every pool',
      input: [
        { series: 'tempora_generation_queue_depth{tempora_component="agent-pool", pool="agents", instance="agents-0"}', values: '5x20' },
        { series: 'tempora_generation_queue_depth{tempora_component="agent-pool", pool="batch", instance="batch-0"}', values: '50x20' },
      ],
      at: '15m',
      fires: [],
    },
  ],
};
