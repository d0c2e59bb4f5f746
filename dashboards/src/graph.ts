import { dashboard, red, SEL } from './panels.ts';

/** The graph: how fast it answers, how big its index is, and what its workers do and spend. */
export const graph = dashboard({
  uid: 'tempora-graph',
  title: 'Tempora / Graph',
  description: 'Graph reads (traverse, path, search), its in-memory index, and the renderer, expander, judge and daily workers.',
  components: ['graph', 'graph-worker'],
  jobMetric: 'up',
  rows: [
    { title: 'Requests by route', panels: red('route', 'route template') },
    {
      title: 'Index and MCP',
      panels: [
        {
          title: 'Edges in the index',
          description: 'Edges held by the in-memory adjacency index of each replica.',
          unit: 'short',
          queries: [{ expr: `graph_index_edges{${SEL}}`, legend: '{{instance}}' }],
        },
        {
          title: 'Index load time',
          description: 'How long the last load of the adjacency index from the database took, per replica (at start and after a large change).',
          unit: 's',
          queries: [{ expr: `graph_index_load_seconds{${SEL}}`, legend: '{{instance}}' }],
        },
        {
          title: 'MCP tool calls',
          description: 'MCP tool calls per second by tool and outcome: ok, invalid (answered with error and suggestion), failed.',
          unit: 'ops',
          stacked: true,
          queries: [{ expr: `sum by (tool, outcome) (rate(graph_mcp_tool_calls_total{${SEL}}[$__rate_interval]))`, legend: '{{tool}} {{outcome}}' }],
        },
        {
          title: 'Index memory',
          description: 'Bytes held by the adjacency index and the node store of each replica.',
          unit: 'bytes',
          stacked: true,
          queries: [
            { expr: `graph_index_memory_bytes{${SEL}}`, legend: 'index {{instance}}' },
            { expr: `graph_node_store_memory_bytes{${SEL}}`, legend: 'nodes {{instance}}' },
          ],
        },
      ],
    },
    {
      title: 'Workers',
      panels: [
        {
          title: 'Worker jobs',
          description: 'Jobs finished per second by worker role and outcome.',
          unit: 'ops',
          stacked: true,
          queries: [{ expr: `sum by (role, outcome) (rate(graph_worker_jobs_total{${SEL}}[$__rate_interval]))`, legend: '{{role}} {{outcome}}' }],
        },
        {
          title: 'Worker job duration p95',
          description: 'Time per job, 95th percentile, by role.',
          unit: 's',
          queries: [
            {
              expr: `histogram_quantile(0.95, sum by (role, le) (rate(graph_worker_job_duration_seconds_bucket{${SEL}}[$__rate_interval])))`,
              legend: '{{role}}',
            },
          ],
        },
        {
          title: 'Spend against budget',
          description: "Each role's model spend today beside its daily budget (USD): the expander and judge stop at the budget until midnight UTC.",
          unit: 'currencyUSD',
          queries: [
            { expr: `max by (role) (graph_worker_spend_today_usd{${SEL}})`, legend: 'spent {{role}}' },
            { expr: `max by (role) (graph_worker_daily_budget_usd{${SEL}})`, legend: 'budget {{role}}' },
          ],
        },
        {
          title: 'Judge verdicts',
          description: 'Moments the judge decided per second, by verdict.',
          unit: 'ops',
          stacked: true,
          queries: [{ expr: `sum by (verdict) (rate(graph_worker_judge_verdicts_total{${SEL}}[$__rate_interval]))`, legend: '{{verdict}}' }],
        },
      ],
    },
  ],
});
