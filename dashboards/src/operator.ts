import { dashboard, SEL } from './panels.ts';

/** The operator's control loop, in controller-runtime's vocabulary so its panels read like any other operator's. */
export const operator = dashboard({
  uid: 'tempora-operator',
  title: 'Tempora / Operator',
  description:
    'Reconciles, errors, durations, work queues, API writes and leader election of the operator, and the certificates and Secrets its TemporaGateways name.',
  components: ['operator'],
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
          queries: [
            { expr: `sum by (controller, result) (rate(controller_runtime_reconcile_total{${SEL}}[$__rate_interval]))`, legend: '{{controller}} {{result}}' },
          ],
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
          queries: [
            {
              expr: `histogram_quantile(0.99, sum by (controller, le) (rate(controller_runtime_reconcile_time_seconds_bucket{${SEL}}[$__rate_interval])))`,
              legend: '{{controller}}',
            },
          ],
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
        {
          title: 'Work-queue depth',
          description: 'Keys waiting in each work queue: a queue that never drains is a stuck controller.',
          unit: 'short',
          queries: [{ expr: `sum by (name) (workqueue_depth{${SEL}})`, legend: '{{name}}' }],
        },
        {
          title: 'Queue wait p99',
          description: 'Time a key waits in the queue before a worker takes it, 99th percentile.',
          unit: 's',
          queries: [
            {
              expr: `histogram_quantile(0.99, sum by (name, le) (rate(workqueue_queue_duration_seconds_bucket{${SEL}}[$__rate_interval])))`,
              legend: '{{name}}',
            },
          ],
        },
        {
          title: 'Leader',
          description: '1 on the replica that holds the lease and reconciles; the others stand by.',
          unit: 'short',
          queries: [{ expr: `max by (instance) (leader_election_master_status{${SEL}})`, legend: '{{instance}}' }],
        },
      ],
    },
    {
      // Only the leader reads the Secrets; max merges the series of a replica that just handed over.
      title: 'Certificates and Secrets',
      panels: [
        {
          title: 'Certificate expiry',
          description:
            "Time left before the certificate in each TemporaGateway's Ingress TLS Secret expires; below zero it has expired. TemporaCertificateExpiringSoon warns under 14 days and pages under 3.",
          unit: 's',
          queries: [
            {
              expr: `max by (namespace, gateway, secret) (tempora_operator_certificate_expiry_timestamp_seconds{${SEL}}) - time()`,
              legend: '{{namespace}}/{{gateway}} {{secret}}',
            },
          ],
        },
        {
          title: 'Secrets missing',
          description:
            "Per Secret a TemporaGateway names: 1 while it is missing, lacks a key the platform reads from it, or (a TLS Secret) holds no certificate; 0 when it is there. TemporaSecretMissing pages after 10 minutes at 1; the TemporaGateway's Degraded condition says which key.",
          unit: 'short',
          queries: [{ expr: `max by (namespace, gateway, secret) (tempora_operator_secret_missing{${SEL}})`, legend: '{{namespace}}/{{gateway}} {{secret}}' }],
        },
      ],
    },
  ],
});
