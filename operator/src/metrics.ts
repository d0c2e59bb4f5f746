// Prometheus metrics named like controller-runtime's and client-go's workqueue's, so the dashboards and
// alerts written for Go operators read this one too.
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import { AgentPool, GraphWorker, OPTIONAL_CHILDREN, SimulationBudget, TemporaGateway, WATCHED_CHILDREN } from './kube/resources.ts';

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

/** How a reconcile ends, in controller-runtime's words. */
const RECONCILE_RESULTS = ['success', 'requeue_after', 'error'] as const;
/** Why an informer lists in full: its first list, an expired watch (410 Gone), a watch that failed otherwise. */
export const RELIST_REASONS = ['initial', 'gone', 'error'] as const;

/** Values to export for each label of a metric: every combination of them is one series. */
type LabelGrid<L extends string> = { readonly [K in L]: readonly string[] };

/**
 * Exports the series of every combination of each grid's values at 0, as Prometheus' instrumentation advice
 * asks for label values known in advance: until a series exists, rate() over it and the dashboards show no
 * data rather than "none happened". The services have the kit's `zeroed` for this; its module also loads
 * the tracing SDK, which the operator loads only when spans have somewhere to go (main.ts). Called once
 * where a metric's label values become known: prom-client's Histogram.zero empties a series that observed.
 */
export function zeroed<L extends string>(metric: Counter<L> | Histogram<L>, ...grids: Array<NoInfer<LabelGrid<L>>>): void {
  for (const grid of grids) {
    // A set is partial while it is built, and holds a value for every name of L once the loop is done.
    let sets: Array<Partial<Record<L, string>>> = [{}];
    for (const [name, values] of Object.entries<readonly string[]>(grid)) {
      sets = sets.flatMap((set) => values.map((value) => ({ ...set, [name]: value })));
    }
    for (const labels of sets) {
      if (metric instanceof Histogram) metric.zero(labels);
      else metric.inc(labels, 0);
    }
  }
}

/**
 * The writes the operator can send, at 0: children applied and pruned (ServiceMonitors and PodMonitors
 * too, once their CRD is served), its custom resources' status, the gateway's signing key Secret created
 * once, Events, and the leader election Lease.
 */
function zeroWrites(writes: Counter<'verb' | 'resource'>): void {
  const children = [...WATCHED_CHILDREN, ...OPTIONAL_CHILDREN].map((r) => r.plural);
  zeroed(
    writes,
    { verb: ['patch', 'delete'], resource: children },
    { verb: ['patch'], resource: [TemporaGateway, GraphWorker, AgentPool, SimulationBudget].map((r) => `${r.plural}/status`) },
    { verb: ['post'], resource: ['secrets', 'events', 'leases'] },
    { verb: ['put'], resource: ['leases'] },
  );
}

/** A controller's series and its work queue's (named alike) at 0: once per controller, before its first reconcile. */
export function zeroController(metrics: OperatorMetrics, name: string): void {
  zeroed(metrics.reconcileTotal, { controller: [name], result: RECONCILE_RESULTS });
  zeroed(metrics.reconcileErrors, { controller: [name] });
  zeroed(metrics.reconcileTime, { controller: [name] });
  metrics.activeWorkers.set({ controller: name }, 0);
  for (const metric of [metrics.queueAdds, metrics.queueRetries, metrics.queueLatency, metrics.workDuration]) zeroed(metric, { name: [name] });
}

export function createMetrics(): OperatorMetrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const registers = [registry];
  const metrics: OperatorMetrics = {
    registry,
    ...controllerMetrics(registers),
    ...workqueueMetrics(registers),
    ...apiMetrics(registers),
    ...gatewaySecretMetrics(registers),
  };
  zeroWrites(metrics.apiWrites);
  return metrics;
}

/** controller-runtime's: reconciles by controller and result, their errors and duration, and busy workers. */
function controllerMetrics(registers: Registry[]): Pick<OperatorMetrics, 'reconcileTotal' | 'reconcileErrors' | 'reconcileTime' | 'activeWorkers'> {
  return {
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
  };
}

/** client-go's workqueue's, by queue name: depth, adds, retries, time waiting and time in work. */
function workqueueMetrics(registers: Registry[]): Pick<OperatorMetrics, 'queueDepth' | 'queueAdds' | 'queueRetries' | 'queueLatency' | 'workDuration'> {
  return {
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
  };
}

/** The operator's dealings with the Kubernetes API: writes, informer relists and restarts, and the leader lease. */
function apiMetrics(registers: Registry[]): Pick<OperatorMetrics, 'apiWrites' | 'informerRelists' | 'informerRestarts' | 'leaderStatus'> {
  return {
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
  };
}

/** The Secrets a TemporaGateway names: its TLS certificate's expiry, and which are missing. */
function gatewaySecretMetrics(registers: Registry[]): Pick<OperatorMetrics, 'certificateExpiry' | 'secretMissing'> {
  return {
    // Named like cert-manager's certmanager_certificate_expiration_timestamp_seconds, so alerts read it the same way.
    certificateExpiry: new Gauge({
      name: 'tempora_operator_certificate_expiry_timestamp_seconds',
      help: "When the certificate in a TemporaGateway's Ingress TLS Secret (tls.crt) expires, in Unix seconds; no series while the Secret is missing or holds no certificate (see tempora_operator_secret_missing)",
      labelNames: ['namespace', 'gateway', 'secret'],
      registers,
    }),
    secretMissing: new Gauge({
      name: 'tempora_operator_secret_missing',
      help: 'Whether a Secret a TemporaGateway names is missing, lacks a key read from it, or (its Ingress TLS Secret) holds no certificate (1), or is there (0)',
      labelNames: ['namespace', 'gateway', 'secret'],
      registers,
    }),
  };
}
