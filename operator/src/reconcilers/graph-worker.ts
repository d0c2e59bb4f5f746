// GraphWorker: one background worker of the graph service. renderer, expander and judge run continuously
// as a Deployment (with a PodMonitor when the Prometheus Operator is installed); daily runs on a schedule
// as a CronJob and serves nothing. The role is immutable (the CRD refuses a change), so one GraphWorker
// never switches between the two. A worker works on the graph's PostgreSQL, beside the graph service of
// the TemporaGateway it names, which lends it its keys (the generation service wants a service key) and what the
// worker does not set itself (database, Redis, provider credentials, log level, tracing).
import type { GraphWorker, TemporaGateway } from '../api/v1alpha1/index.ts';
import * as R from '../kube/resources.ts';
import { applyChildren, liveChild } from './apply-children.ts';
import { childLabels, type DesiredChild, type Reconciler } from './context.ts';
import { gatewayOf, redisKeyPrefix } from './gateway-ref.ts';
import { peerUrls } from './platform-services.ts';
import { type Blocked, deploymentState, readiness } from './readiness.ts';
import { updateStatus } from './status.ts';
import { child, configMap, type EnvFromSource, envFromSecretKey, podTemplate, workerDeployment } from './workload.ts';

/** Once a day; the schema leaves schedule unset for the roles that are not scheduled. */
export const DEFAULT_DAILY_SCHEDULE = '0 4 * * *';

/** `gateway`: the TemporaGateway the worker names, which lends what the worker does not set (its monitor labels too). */
export function desiredGraphWorkerChildren(worker: GraphWorker, withPodMonitor: boolean, gateway?: TemporaGateway): DesiredChild[] {
  const { spec } = worker;
  const name = worker.metadata.name;
  const namespace = worker.metadata.namespace;
  const component = `graph-${spec.role}`;
  const config: Record<string, string> = {
    WORKER_ROLE: spec.role,
    WORKER_CONCURRENCY: String(spec.concurrency),
    WORKER_DAILY_BUDGET_USD: String(spec.dailyBudgetUsd),
    ...peerUrls(spec.gatewayRef, namespace ?? 'default', ['generation', 'graph']),
    REDIS_KEY_PREFIX: redisKeyPrefix(namespace, spec.gatewayRef),
    LOG_LEVEL: gateway?.spec.logLevel ?? 'info',
  };
  const envFrom: EnvFromSource[] = [{ configMapRef: { name } }];
  if (gateway?.spec.secrets?.keys) envFrom.push({ secretRef: { name: gateway.spec.secrets.keys } });
  const providers = spec.providersSecret ?? gateway?.spec.secrets?.providers;
  if (providers) envFrom.push({ secretRef: { name: providers } });
  const pod = {
    owner: worker,
    component,
    image: spec.image,
    imageName: 'graph',
    // Like the generation image's worker, the graph image's runs as `node src/worker.ts <role>`.
    command: ['node', 'src/worker.ts', spec.role],
    env: [...envFromSecretKey('DATABASE_URL', spec.database ?? gateway?.spec.database), ...envFromSecretKey('REDIS_URL', spec.redis ?? gateway?.spec.redis)],
    envFrom,
    resources: spec.resources,
    tracing: gateway?.spec.tracing,
    config,
    pods: spec.pods,
  };
  const children: DesiredChild[] = [configMap(worker, name, component, config)];
  if (spec.role !== 'daily') {
    // The continuous roles serve /health (probes) and /metrics; daily is a run-to-completion Job.
    const monitor = withPodMonitor ? { platformComponent: 'graph-worker', monitoring: spec.monitoring ?? gateway?.spec.monitoring } : undefined;
    return [...children, ...workerDeployment({ ...pod, name, replicas: spec.replicas }, monitor)];
  }
  children.push(
    child(
      R.CronJob,
      { name, labels: childLabels(worker, component) },
      {
        spec: {
          schedule: spec.schedule ?? DEFAULT_DAILY_SCHEDULE,
          timeZone: spec.timeZone,
          concurrencyPolicy: spec.concurrencyPolicy,
          successfulJobsHistoryLimit: spec.successfulJobsHistoryLimit,
          failedJobsHistoryLimit: spec.failedJobsHistoryLimit,
          jobTemplate: { spec: { backoffLimit: 2, template: podTemplate({ ...pod, restartPolicy: 'OnFailure' }) } },
        },
      },
    ),
  );
  return children;
}

/** A worker serves nobody without its TemporaGateway, and has nothing to work on without the graph's PostgreSQL. */
function workerBlocked(worker: GraphWorker, gateway: TemporaGateway | undefined): Blocked | undefined {
  const ref = `TemporaGateway ${worker.spec.gatewayRef}`;
  if (!gateway) return { reason: 'GatewayNotFound', message: `${ref} (spec.gatewayRef) does not exist in this namespace` };
  if (!(worker.spec.database ?? gateway.spec.database)) {
    return { reason: 'DatabaseRequired', message: `the workers share the graph's PostgreSQL: set spec.database or the ${ref}'s spec.database` };
  }
  return undefined;
}

export const graphWorkerReconciler: Reconciler<GraphWorker> = {
  resource: R.GraphWorker,
  async reconcile(worker, ctx) {
    const { spec } = worker;
    const gateway = gatewayOf(ctx, worker.metadata.namespace, spec.gatewayRef);
    const blocked = workerBlocked(worker, gateway);
    const withPodMonitor = spec.role !== 'daily' && (await ctx.features.serves(R.PodMonitor));
    // A worker that cannot run keeps no workload: its children are pruned until it can.
    const applied = await applyChildren(worker, blocked ? [] : desiredGraphWorkerChildren(worker, withPodMonitor, gateway), ctx);
    const { conditions, settling, converging } = readiness(applied, { pods: ctx.pods.controlledBy(worker.metadata.uid ?? ''), blocked });
    const daily = spec.role === 'daily';
    const fields: Record<string, unknown> = { workload: daily ? 'CronJob' : 'Deployment' };
    const lastScheduleTime = daily ? liveChild(applied, R.CronJob, worker.metadata.name)?.status?.lastScheduleTime : undefined;
    if (lastScheduleTime) fields.lastScheduleTime = lastScheduleTime;
    const dep = daily ? undefined : liveChild(applied, R.Deployment, worker.metadata.name);
    const state = dep ? deploymentState(dep) : undefined;
    const counts = state ? { replicas: state.replicas, availableReplicas: state.availableReplicas } : undefined;
    const result = await updateStatus(worker, R.GraphWorker, { conditions, fields, counts, settling, converging }, ctx);
    if (applied.errors.length > 0) throw new Error(applied.errors.join('; '));
    return result;
  },
};
