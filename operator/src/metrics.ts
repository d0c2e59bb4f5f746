// Prometheus metrics named like controller-runtime's and client-go's workqueue's, so the dashboards and
// alerts written for Go operators read this one too.
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

export interface OperatorMetrics {
  registry: Registry;
  reconcileTotal: Counter<'controller' | 'result'>;
  reconcileErrors: Counter<'controller'>;
  reconcileTime: Histogram<'controller'>;
  activeWorkers: Gauge<'controller'>;
  queueDepth: Gauge<'name'>;
  queueAdds: Counter<'name'>;
  queueRetries: Counter<'name'>;
  queueLatency: Histogram<'name'>;
  workDuration: Histogram<'name'>;
  apiWrites: Counter<'verb' | 'resource'>;
  informerRelists: Counter<'resource' | 'reason'>;
  informerRestarts: Counter<'resource'>;
  leaderStatus: Gauge<'name'>;
  certificateExpiry: Gauge<'namespace' | 'gateway' | 'secret'>;
  secretMissing: Gauge<'namespace' | 'gateway' | 'secret'>;
}

const DURATION_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

export function createMetrics(): OperatorMetrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const registers = [registry];
  return {
    registry,
    reconcileTotal: new Counter({
      name: 'controller_runtime_reconcile_total',
      help: 'Total number of reconciliations per controller',
      labelNames: ['controller', 'result'],
      registers,
    }),
    reconcileErrors: new Counter({
      name: 'controller_runtime_reconcile_errors_total',
      help: 'Total number of reconciliation errors per controller',
      labelNames: ['controller'],
      registers,
    }),
    reconcileTime: new Histogram({
      name: 'controller_runtime_reconcile_time_seconds',
      help: 'Length of time per reconciliation per controller',
      labelNames: ['controller'],
      buckets: DURATION_BUCKETS,
      registers,
    }),
    activeWorkers: new Gauge({
      name: 'controller_runtime_active_workers',
      help: 'Number of currently used workers per controller',
      labelNames: ['controller'],
      registers,
    }),
    queueDepth: new Gauge({ name: 'workqueue_depth', help: 'Current depth of workqueue', labelNames: ['name'], registers }),
    queueAdds: new Counter({
      name: 'workqueue_adds_total',
      help: 'Total number of adds handled by workqueue',
      labelNames: ['name'],
      registers,
    }),
    queueRetries: new Counter({
      name: 'workqueue_retries_total',
      help: 'Total number of retries handled by workqueue',
      labelNames: ['name'],
      registers,
    }),
    queueLatency: new Histogram({
      name: 'workqueue_queue_duration_seconds',
      help: 'How long in seconds an item stays in workqueue before being requested',
      labelNames: ['name'],
      buckets: DURATION_BUCKETS,
      registers,
    }),
    workDuration: new Histogram({
      name: 'workqueue_work_duration_seconds',
      help: 'How long in seconds processing an item from workqueue takes',
      labelNames: ['name'],
      buckets: DURATION_BUCKETS,
      registers,
    }),
    apiWrites: new Counter({
      name: 'tempora_operator_api_writes_total',
      help: 'Mutating requests sent to the Kubernetes API, by verb and resource',
      labelNames: ['verb', 'resource'],
      registers,
    }),
    informerRelists: new Counter({
      name: 'tempora_operator_informer_relists_total',
      help: 'Full lists performed by informers, by reason (initial, gone, error)',
      labelNames: ['resource', 'reason'],
      registers,
    }),
    informerRestarts: new Counter({
      name: 'tempora_operator_informer_restarts_total',
      help: 'Watch restarts after an error other than 410 Gone',
      labelNames: ['resource'],
      registers,
    }),
    leaderStatus: new Gauge({
      name: 'leader_election_master_status',
      help: 'Whether this instance currently holds the leader lease (1) or not (0)',
      labelNames: ['name'],
      registers,
    }),
    // Named like cert-manager's certmanager_certificate_expiration_timestamp_seconds, so alerts read it the same way.
    certificateExpiry: new Gauge({
      name: 'tempora_operator_certificate_expiry_timestamp_seconds',
      help: "When the certificate in a Gateway's Ingress TLS Secret (tls.crt) expires, in Unix seconds; no series while the Secret is missing or holds no certificate (see tempora_operator_secret_missing)",
      labelNames: ['namespace', 'gateway', 'secret'],
      registers,
    }),
    secretMissing: new Gauge({
      name: 'tempora_operator_secret_missing',
      help: 'Whether a Secret a Gateway names is missing, lacks a key read from it, or (its Ingress TLS Secret) holds no certificate (1), or is there (0)',
      labelNames: ['namespace', 'gateway', 'secret'],
      registers,
    }),
  };
}
