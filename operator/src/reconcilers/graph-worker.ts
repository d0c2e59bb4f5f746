// GraphWorker: one background worker of the graph service. renderer, expander and judge run continuously
// as a Deployment (with a PodMonitor when the Prometheus Operator is installed); daily runs on a schedule
// as a CronJob and serves nothing. The role is immutable (the CRD refuses a change), so one GraphWorker
// never switches between the two.
import type { GraphWorker } from '../api/v1alpha1/index.ts';
import * as R from '../kube/resources.ts';
import { applyChildren } from './apply-children.ts';
import { childLabels, type DesiredChild, type Reconciler } from './context.ts';
import { updateStatus } from './status.ts';
import { peerUrls } from './platform-services.ts';
import { readiness } from './readiness.ts';
import { configMap, envFromSecretKey, obj, podTemplate, workerDeployment } from './workload.ts';

/** Once a day; the schema leaves schedule unset for the roles that are not scheduled. */
export const DEFAULT_DAILY_SCHEDULE = '0 4 * * *';

export function desiredGraphWorkerChildren(gw: GraphWorker, withPodMonitor: boolean): DesiredChild[] {
  const { spec } = gw;
  const name = gw.metadata.name;
  const component = `graph-${spec.role}`;
  const config: Record<string, string> = {
    WORKER_ROLE: spec.role,
    WORKER_CONCURRENCY: String(spec.concurrency),
    WORKER_DAILY_BUDGET_USD: String(spec.dailyBudgetUsd),
    ...peerUrls(spec.gatewayRef, gw.metadata.namespace ?? 'default', ['generation', 'graph']),
  };
  const envFrom: Record<string, unknown>[] = [{ configMapRef: { name } }];
  if (spec.providersSecret) envFrom.push({ secretRef: { name: spec.providersSecret } });
  const pod = {
    owner: gw,
    component,
    image: spec.image,
    imageName: 'graph',
    // Like the generation image's worker, the graph image's runs as `node src/worker.ts <role>`.
    command: ['node', 'src/worker.ts', spec.role],
    env: [...envFromSecretKey('DATABASE_URL', spec.database), ...envFromSecretKey('REDIS_URL', spec.redis)],
    envFrom,
    resources: spec.resources,
    config,
  };
  const children: DesiredChild[] = [configMap(gw, name, component, config)];
  if (spec.role !== 'daily') {
    // The continuous roles serve /health (probes) and /metrics; daily is a run-to-completion Job.
    return [...children, ...workerDeployment({ ...pod, name, replicas: spec.replicas }, withPodMonitor)];
  }
  children.push({
    resource: R.CronJob,
    object: obj(name, childLabels(gw, component), {
      schedule: spec.schedule ?? DEFAULT_DAILY_SCHEDULE,
      timeZone: spec.timeZone,
      concurrencyPolicy: spec.concurrencyPolicy,
      successfulJobsHistoryLimit: spec.successfulJobsHistoryLimit,
      failedJobsHistoryLimit: spec.failedJobsHistoryLimit,
      jobTemplate: { spec: { backoffLimit: 2, template: podTemplate({ ...pod, restartPolicy: 'OnFailure' }) } },
    }),
  });
  return children;
}

export const graphWorkerReconciler: Reconciler<GraphWorker> = {
  resource: R.GraphWorker,
  async reconcile(gw, ctx) {
    const { spec } = gw;
    const withPodMonitor = spec.role !== 'daily' && (await ctx.features.serves(R.PodMonitor));
    const applied = await applyChildren(gw, desiredGraphWorkerChildren(gw, withPodMonitor), ctx);
    const { conditions, settling } = readiness(applied);
    const workload = spec.role === 'daily' ? applied.live.get(`cronjobs/${gw.metadata.name}`) : applied.live.get(`deployments/${gw.metadata.name}`);
    const fields: Record<string, unknown> = { workload: spec.role === 'daily' ? 'CronJob' : 'Deployment' };
    const cronStatus = (workload?.kind === 'CronJob' ? workload.status : undefined) as { lastScheduleTime?: string } | undefined;
    if (cronStatus?.lastScheduleTime) fields.lastScheduleTime = cronStatus.lastScheduleTime;
    if (workload?.kind === 'Deployment') {
      fields.replicas = (workload.status as { replicas?: number } | undefined)?.replicas ?? 0;
    }
    await updateStatus(gw, R.GraphWorker, { conditions, fields, settling }, ctx);
    if (applied.errors.length > 0) throw new Error(applied.errors.join('; '));
  },
};
