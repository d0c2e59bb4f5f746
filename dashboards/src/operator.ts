import { SEL, dashboard } from './panels.ts';

/** The operator's control loop, in controller-runtime's vocabulary so its panels read like any other operator's. */
export const operator = dashboard({
  uid: 'tempora-operator',
  title: 'Tempora / Operator',
  description: 'Reconciles, errors, durations, work queues, API writes and leader election of the operator.',
  jobMetric: 'controller_runtime_reconcile_total',
  rows: [
    {
      title: 'Reconciles',
      panels: [
        {
          title: 'Reconciles',
          description: 'Reconciles per second by controller and result.',
          unit: 'ops',
          stacked: true,
          queries: [{ expr: `sum by (controller, result) (rate(controller_runtime_reconcile_total{${SEL}}[$__rate_interval]))`, legend: '{{controller}} {{result}}' }],
        },
        {
          title: 'Reconcile errors',
          description: 'Reconciles that failed per second, by controller: each is retried with back-off.',
          unit: 'ops',
          queries: [{ expr: `sum by (controller) (rate(controller_runtime_reconcile_errors_total{${SEL}}[$__rate_interval]))`, legend: '{{controller}}' }],
        },
        {
          title: 'Reconcile duration p99',
          description: 'Time per reconcile, 99th percentile, by controller.',
          unit: 's',
          queries: [{ expr: `histogram_quantile(0.99, sum by (controller, le) (rate(controller_runtime_reconcile_time_seconds_bucket{${SEL}}[$__rate_interval])))`, legend: '{{controller}}' }],
        },
        {
          title: 'API writes',
          description: 'Writes to the API server per second by verb and resource: at steady state this is zero.',
          unit: 'ops',
          stacked: true,
          queries: [{ expr: `sum by (verb, resource) (rate(tempora_operator_api_writes_total{${SEL}}[$__rate_interval]))`, legend: '{{verb}} {{resource}}' }],
        },
      ],
    },
    {
      title: 'Work queues and leadership',
      panels: [
        { title: 'Work-queue depth', description: 'Keys waiting in each work queue: a queue that never drains is a stuck controller.', unit: 'short', queries: [{ expr: `sum by (name) (workqueue_depth{${SEL}})`, legend: '{{name}}' }] },
        {
          title: 'Queue wait p99',
          description: 'Time a key waits in the queue before a worker takes it, 99th percentile.',
          unit: 's',
          queries: [{ expr: `histogram_quantile(0.99, sum by (name, le) (rate(workqueue_queue_duration_seconds_bucket{${SEL}}[$__rate_interval])))`, legend: '{{name}}' }],
        },
        { title: 'Leader', description: '1 on the replica that holds the lease and reconciles; the others stand by.', unit: 'short', queries: [{ expr: `max by (instance) (leader_election_master_status{${SEL}})`, legend: '{{instance}}' }] },
      ],
    },
  ],
});
