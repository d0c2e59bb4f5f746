import { SEL, dashboard, red } from './panels.ts';

/** The scene pipeline: how many scenes, how long each agent takes, what fails, and the agent pool's backlog. */
export const generation = dashboard({
  uid: 'tempora-generation',
  title: 'Tempora / Generation',
  description: 'Generation requests, the 14 agents, model providers and the agent pool.',
  // The service and the pool's workers both report it (the workers no agent latency), so both jobs can be picked.
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
          queries: [{ expr: `histogram_quantile(0.95, sum by (agent, le) (rate(generation_agent_duration_seconds_bucket{${SEL}}[$__rate_interval])))`, legend: '{{agent}}' }],
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
          queries: [{ expr: `sum by (provider, direction) (rate(generation_agent_tokens_total{${SEL}}[$__rate_interval]))`, legend: '{{provider}} {{direction}}' }],
        },
        {
          title: 'Agent calls by provider',
          description: 'Agent calls per second by provider and status: fallbacks show as calls moving from one provider to the next.',
          unit: 'ops',
          stacked: true,
          queries: [{ expr: `sum by (provider, status) (rate(generation_agent_duration_seconds_count{${SEL}}[$__rate_interval]))`, legend: '{{provider}} {{status}}' }],
        },
      ],
    },
    {
      title: 'Agent pool',
      panels: [
        {
          title: 'Queue depth',
          description: 'Agent tasks waiting or running on the Redis agent pool, by pool: the AgentPool autoscaler\'s signal (every process reports the same stream, hence max).',
          unit: 'short',
          queries: [{ expr: `max by (pool) (tempora_generation_queue_depth{${SEL}})`, legend: '{{pool}}' }],
        },
        {
          title: 'Pool workers',
          description: 'Agent-pool worker processes reporting, and the tasks each finishes per second.',
          unit: 'short',
          queries: [
            { expr: `count(sum by (instance) (rate(generation_worker_tasks_total{${SEL}}[$__rate_interval])))`, legend: 'workers' },
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
