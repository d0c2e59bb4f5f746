import { dashboard, red, SEL } from './panels.ts';

/** The scene pipeline: how many scenes, how long each agent takes, what fails, and the agent pool's backlog. */
export const generation = dashboard({
  uid: 'tempora-generation',
  title: 'Tempora / Generation',
  description: 'Generation requests, the 14 agents, model providers and the agent pool.',
  // The service and the pool's workers both report it (the workers no agent latency), so both jobs can be picked.
  components: ['generation', 'agent-pool'],
  jobMetric: 'generation_agent_queue_depth',
  rows: [
    {
      title: 'Requests',
      panels: [
        {
          title: 'Generations',
          description: 'Generation requests per second by mode (sync, stream, async) and outcome.',
          unit: 'reqps',
          stacked: true,
          queries: [{ expr: `sum by (mode, outcome) (rate(generation_requests_total{${SEL}}[$__rate_interval]))`, legend: '{{mode}} {{outcome}}' }],
        },
        {
          title: 'Pipeline duration',
          description:
            'Whole generations, from the graph lookup to the stored scene, sync, stream and async alike: median and 95th percentile by mode (the route latency below ends when a 202 or a stream starts).',
          unit: 's',
          queries: [
            {
              expr: `histogram_quantile(0.5, sum by (mode, le) (rate(generation_pipeline_duration_seconds_bucket{${SEL}}[$__rate_interval])))`,
              legend: 'p50 {{mode}}',
            },
            {
              expr: `histogram_quantile(0.95, sum by (mode, le) (rate(generation_pipeline_duration_seconds_bucket{${SEL}}[$__rate_interval])))`,
              legend: 'p95 {{mode}}',
            },
          ],
        },
        ...red('route', 'route template').slice(1),
      ],
    },
    {
      title: 'Agents',
      panels: [
        {
          title: 'Agent latency p95',
          description: 'Time per agent call, 95th percentile, by agent.',
          unit: 's',
          queries: [
            {
              expr: `histogram_quantile(0.95, sum by (agent, le) (rate(generation_agent_duration_seconds_bucket{${SEL}}[$__rate_interval])))`,
              legend: '{{agent}}',
            },
          ],
        },
        {
          title: 'Agent failures',
          description: 'Failed agent calls per second by agent, provider and error code: a provider outage shows as one provider across agents.',
          unit: 'ops',
          stacked: true,
          // `or … * 0`: every agent and provider drawn at 0 while nothing fails, rather than no data.
          queries: [
            {
              expr: `sum by (agent, provider, code) (rate(generation_agent_errors_total{${SEL}}[$__rate_interval])) or sum by (agent, provider) (rate(generation_agent_duration_seconds_count{${SEL}}[$__rate_interval])) * 0`,
              legend: '{{agent}} {{provider}} {{code}}',
            },
          ],
        },
        {
          title: 'Tokens',
          description: 'Model tokens per second by provider and direction (input, output): what the pipeline costs.',
          unit: 'short',
          stacked: true,
          queries: [
            { expr: `sum by (provider, direction) (rate(generation_agent_tokens_total{${SEL}}[$__rate_interval]))`, legend: '{{provider}} {{direction}}' },
          ],
        },
        {
          title: 'Agent calls by provider',
          description: 'Agent calls per second by provider and status: fallbacks show as calls moving from one provider to the next.',
          unit: 'ops',
          stacked: true,
          queries: [
            { expr: `sum by (provider, status) (rate(generation_agent_duration_seconds_count{${SEL}}[$__rate_interval]))`, legend: '{{provider}} {{status}}' },
          ],
        },
        {
          title: 'Provider fallbacks',
          description:
            'Provider failures a fallback absorbed, per second, by agent and the providers it went from and to: the call still succeeded (or failed further down the chain), so only this and Agent failures show the failed provider.',
          unit: 'ops',
          stacked: true,
          // A fallback exists only between providers a deployment configured, so no series can be made at
          // zero in advance: the zero line says "none" where a missing series would say "No data".
          queries: [
            {
              expr: `sum by (agent, from, to) (rate(generation_provider_fallbacks_total{${SEL}}[$__rate_interval])) or vector(0)`,
              legend: '{{agent}} {{from}} → {{to}}',
            },
          ],
        },
      ],
    },
    {
      title: 'Agent pool',
      panels: [
        {
          title: 'Queue depth',
          description:
            "Agent tasks waiting or running on the Redis agent pool, by pool: the AgentPool autoscaler's signal (every process reports the same stream, hence max).",
          unit: 'short',
          queries: [{ expr: `max by (pool) (tempora_generation_queue_depth{${SEL}})`, legend: '{{pool}}' }],
        },
        {
          title: 'Oldest task age',
          description:
            "Age of the oldest agent task not yet finished, by pool: the pool's lag. It grows while tasks wait for a free worker (or one runs long); a task waits at most AGENT_POOL_TASK_TIMEOUT_MS.",
          unit: 's',
          queries: [{ expr: `max by (pool) (generation_agent_pool_oldest_task_age_seconds{${SEL}})`, legend: '{{pool}}' }],
        },
        {
          title: 'Tasks waiting',
          description: 'Agent tasks no worker has picked up yet, by pool (the queue depth less the tasks running).',
          unit: 'short',
          queries: [{ expr: `max by (pool) (generation_agent_pool_waiting_tasks{${SEL}})`, legend: '{{pool}}' }],
        },
        {
          title: 'Pool workers',
          description:
            "Workers alive in each pool's consumer group, idle ones included (read, claimed or heartbeat within AGENT_POOL_CLAIM_IDLE_MS), and the tasks each worker finishes per second.",
          unit: 'short',
          queries: [
            { expr: `max by (pool) (generation_agent_pool_workers{${SEL}})`, legend: 'workers {{pool}}' },
            { expr: `sum by (instance) (rate(generation_worker_tasks_total{${SEL}}[$__rate_interval]))`, legend: 'tasks/s {{instance}}' },
          ],
        },
      ],
    },
    {
      title: 'Callbacks',
      panels: [
        {
          title: 'Callback deliveries',
          description: 'Asynchronous results POSTed to callers per second, by outcome (delivered, retried, failed).',
          unit: 'ops',
          stacked: true,
          queries: [{ expr: `sum by (outcome) (rate(generation_callbacks_total{${SEL}}[$__rate_interval]))`, legend: '{{outcome}}' }],
        },
      ],
    },
  ],
});
