// AgentPool: the generation service's agent workers as a Deployment scaled on queue depth (and a PodMonitor
// when the Prometheus Operator is installed). Where KEDA is installed and the pool names the Prometheus that
// scrapes it (spec.autoscaling.prometheusAddress), a KEDA ScaledObject reads queue depth from that Prometheus
// and KEDA makes and owns the HorizontalPodAutoscaler; elsewhere the operator's own autoscaling/v2 HPA scales on
// CPU, and on queue depth too while an external metrics adapter serves it. Either way the HPA owns the
// Deployment's replicas, so the operator never sets them. The pool serves the TemporaGateway it names: that
// TemporaGateway's generation pods put their agent tasks on the pool's Redis stream (gateway.ts), and the pool
// takes from the TemporaGateway what it does not set itself (Redis, provider credentials, log level, tracing).

import type { V2MetricSpec } from '@kubernetes/client-node';
import type { AgentPool, TemporaGateway } from '../api/v1alpha1/index.ts';
import type { HorizontalPodAutoscaler, Json, ScaledObjectTrigger } from '../kube/object.ts';
import * as R from '../kube/resources.ts';
import { applyChildren, liveChild } from './apply-children.ts';
import { childLabels, type DesiredChild, type ReconcileContext, type Reconciler } from './context.ts';
import { gatewayOf, poolRedis, redisKeyPrefix, servingPool } from './gateway-ref.ts';
import { peerUrls } from './platform-services.ts';
import { type Blocked, deploymentState, readiness } from './readiness.ts';
import { updateStatus } from './status.ts';
import { child, configMap, type EnvFromSource, envFromSecretKey, modelSettings, workerDeployment } from './workload.ts';

/**
 * The queue-depth metric, selected by the label `pool`: the generation pods and the pool's workers export it
 * with the pool's name (AGENT_POOL_NAME), each the depth of the same Redis stream.
 */
export const QUEUE_DEPTH_METRIC = 'tempora_generation_queue_depth';

/** The optional APIs an AgentPool's children depend on. */
export interface AgentPoolFeatures {
  /** A metrics adapter is registered: the operator's HPA also scales on queue depth. */
  queueMetric: boolean;
  /** The PodMonitor CRD is served. */
  podMonitor: boolean;
  /** KEDA's ScaledObject CRD is served. */
  keda: boolean;
}

/** The HPA KEDA makes for a ScaledObject of this name (KEDA's default name, which the operator does not override). */
export function kedaHpaName(pool: string): string {
  return `keda-hpa-${pool}`;
}

/**
 * The PromQL KEDA's prometheus trigger runs: every pod of the pool and its TemporaGateway's generation pods
 * report the same stream, so the depth is their maximum, not their sum.
 */
function queueDepthQuery(pool: AgentPool): string {
  return `max(${QUEUE_DEPTH_METRIC}{namespace="${pool.metadata.namespace ?? 'default'}",pool="${pool.metadata.name}"})`;
}

/** Whether the pool scales through KEDA: the ScaledObject kind is served and the pool names its Prometheus. */
function scalesWithKeda(pool: AgentPool, features: AgentPoolFeatures): boolean {
  return features.keda && pool.spec.autoscaling?.prometheusAddress !== undefined;
}

/**
 * What both autoscalers share: the pool's Deployment as their target, its bounds, and how long a lower
 * recommendation must hold before the pool shrinks (the HPA's default when the pool does not say).
 */
function scaling(pool: AgentPool) {
  const name = pool.metadata.name;
  const stabilization = pool.spec.autoscaling?.scaleDownStabilizationSeconds;
  return {
    scaleTargetRef: { apiVersion: 'apps/v1', kind: 'Deployment', name },
    minReplicas: pool.spec.minReplicas,
    maxReplicas: pool.spec.maxReplicas,
    behavior: stabilization === undefined ? undefined : { scaleDown: { stabilizationWindowSeconds: stabilization } },
  };
}

/** KEDA's ScaledObject on the queue depth Prometheus reports, and on CPU where the pods request it. */
function scaledObject(pool: AgentPool, prometheusAddress: string, labels: Record<string, string>): DesiredChild {
  const { spec } = pool;
  const { scaleTargetRef, minReplicas, maxReplicas, behavior } = scaling(pool);
  const triggers: ScaledObjectTrigger[] = [
    {
      type: 'prometheus',
      metricType: 'AverageValue',
      metadata: { serverAddress: prometheusAddress, query: queueDepthQuery(pool), threshold: String(spec.queueDepthTarget) },
    },
  ];
  // A utilization is a share of the pods' CPU request: without one the metric fails, and a failing metric
  // stops KEDA's HPA from ever scaling down, so CPU counts only where the pods request it.
  if (spec.resources?.requests?.cpu !== undefined)
    triggers.push({ type: 'cpu', metricType: 'Utilization', metadata: { value: String(spec.cpuTargetPercent) } });
  return child(
    R.ScaledObject,
    { name: pool.metadata.name, labels },
    {
      spec: {
        scaleTargetRef,
        minReplicaCount: minReplicas,
        maxReplicaCount: maxReplicas,
        ...(behavior === undefined ? {} : { advanced: { horizontalPodAutoscalerConfig: { behavior } } }),
        triggers,
      },
    },
  );
}

/** The operator's own HPA: on the queue depth an external metrics API serves, and on CPU. */
function horizontalPodAutoscaler(pool: AgentPool, features: AgentPoolFeatures, labels: Record<string, string>): DesiredChild {
  const { spec } = pool;
  const { behavior, ...bounds } = scaling(pool);
  const metrics: Json<V2MetricSpec>[] = [];
  if (features.queueMetric) {
    metrics.push({
      type: 'External',
      external: {
        metric: { name: QUEUE_DEPTH_METRIC, selector: { matchLabels: { pool: pool.metadata.name } } },
        target: { type: 'AverageValue', averageValue: String(spec.queueDepthTarget) },
      },
    });
  }
  // As under KEDA, CPU counts where the pods request it; without a request it counts only when there is no
  // queue metric, since an HPA without metrics gets CPU anyway.
  if (spec.resources?.requests?.cpu !== undefined || metrics.length === 0)
    metrics.unshift({ type: 'Resource', resource: { name: 'cpu', target: { type: 'Utilization', averageUtilization: spec.cpuTargetPercent } } });
  return child(
    R.HorizontalPodAutoscaler,
    { name: pool.metadata.name, labels },
    { spec: { ...bounds, metrics, ...(behavior === undefined ? {} : { behavior }) } },
  );
}

/** The pool's autoscaler: KEDA's ScaledObject, or the operator's own HPA. */
function autoscaler(pool: AgentPool, features: AgentPoolFeatures, labels: Record<string, string>): DesiredChild {
  const address = pool.spec.autoscaling?.prometheusAddress;
  return address !== undefined && scalesWithKeda(pool, features) ? scaledObject(pool, address, labels) : horizontalPodAutoscaler(pool, features, labels);
}

/** `gateway`: the TemporaGateway the pool serves, which lends what the pool does not set (its monitor labels too). */
export function desiredAgentPoolChildren(pool: AgentPool, features: AgentPoolFeatures, gateway?: TemporaGateway): DesiredChild[] {
  const { spec } = pool;
  const name = pool.metadata.name;
  const namespace = pool.metadata.namespace;
  const component = 'generation-agents';
  const config = {
    AGENT_POOL: 'redis',
    AGENT_POOL_NAME: name,
    AGENT_POOL_CONCURRENCY: String(spec.concurrency),
    ...modelSettings(spec.models),
    ...peerUrls(spec.gatewayRef, namespace ?? 'default', ['generation']),
    // The stream's keys: the same prefix as the TemporaGateway's generation pods.
    REDIS_KEY_PREFIX: redisKeyPrefix(namespace, spec.gatewayRef),
    LOG_LEVEL: gateway?.spec.logLevel ?? 'info',
  };
  const providers = spec.providerSecrets ?? (gateway?.spec.secrets?.providers ? [gateway.spec.secrets.providers] : []);
  const envFrom: EnvFromSource[] = [{ configMapRef: { name } }, ...providers.map((s) => ({ secretRef: { name: s } }))];
  return [
    configMap(pool, name, component, config),
    ...workerDeployment(
      {
        owner: pool,
        name,
        component,
        image: spec.image,
        imageName: 'generation',
        // The generation image's agent pool worker (services/generation/src/worker.ts).
        command: ['node', 'src/worker.ts'],
        replicas: undefined,
        env: envFromSecretKey('REDIS_URL', poolRedis(pool, gateway)),
        envFrom,
        resources: spec.resources,
        tracing: gateway?.spec.tracing,
        config,
        pods: spec.pods,
      },
      features.podMonitor ? { platformComponent: 'agent-pool', monitoring: spec.monitoring ?? gateway?.spec.monitoring } : undefined,
    ),
    autoscaler(pool, features, childLabels(pool, component)),
  ];
}

/** Why a pool cannot run: it serves nobody, has no Redis to take tasks from, or another pool serves its TemporaGateway. */
function poolBlocked(pool: AgentPool, gateway: TemporaGateway | undefined, serving: AgentPool | undefined): Blocked | undefined {
  const ref = `TemporaGateway ${pool.spec.gatewayRef}`;
  if (!gateway) return { reason: 'GatewayNotFound', message: `${ref} (spec.gatewayRef) does not exist in this namespace` };
  if (!poolRedis(pool, gateway)) return { reason: 'RedisRequired', message: `the agent tasks are a Redis stream: set spec.redis or the ${ref}'s spec.redis` };
  if (serving && serving.metadata.uid !== pool.metadata.uid)
    return { reason: 'AnotherPoolServes', message: `AgentPool ${serving.metadata.name} already serves ${ref}` };
  return undefined;
}

export const agentPoolReconciler: Reconciler<AgentPool> = {
  resource: R.AgentPool,
  async reconcile(pool, ctx) {
    const gateway = gatewayOf(ctx, pool.metadata.namespace, pool.spec.gatewayRef);
    const blocked = poolBlocked(pool, gateway, gateway && servingPool(ctx, gateway));
    const [externalMetrics, podMonitor, keda] = await Promise.all([
      ctx.features.externalMetrics(),
      ctx.features.serves(R.PodMonitor),
      ctx.features.serves(R.ScaledObject),
    ]);
    // Where KEDA is installed the external metrics API is KEDA's, which serves its ScaledObjects' metrics
    // only: the operator's HPA would wait for a queue-depth metric that never comes.
    const features = { queueMetric: externalMetrics && !keda, podMonitor, keda };
    // A pool that cannot run keeps no workload: its children are pruned until it can.
    const applied = await applyChildren(pool, blocked ? [] : desiredAgentPoolChildren(pool, features, gateway), ctx);
    if (keda && (blocked || !scalesWithKeda(pool, features))) await pruneUnwatchedScaledObject(pool, ctx);
    const depKey = `deployments/${pool.metadata.name}`;
    const { conditions, settling, converging } = readiness(applied, {
      pods: ctx.pods.controlledBy(pool.metadata.uid ?? ''),
      // The HPA adds pods as the queue grows; the pool is Ready while its minimum is available.
      minAvailable: new Map([[depKey, pool.spec.minReplicas]]),
      blocked,
    });
    const dep = liveChild(applied, R.Deployment, pool.metadata.name);
    const state = dep ? deploymentState(dep) : undefined;
    const hpa = scalesWithKeda(pool, features) ? await kedaHpa(pool, ctx) : liveChild(applied, R.HorizontalPodAutoscaler, pool.metadata.name);
    const desiredReplicas = hpa?.status?.desiredReplicas ?? 0;
    const counts = { replicas: state?.replicas ?? 0, availableReplicas: state?.availableReplicas ?? 0, desiredReplicas };
    // The HPA has yet to bring the Deployment to its count: the pool converges too. Until its first sync
    // (up to 15 s after it is made, and KEDA makes its HPA only once it reconciled the ScaledObject) the HPA
    // desires 0; it then brings the Deployment (one pod by default) into the pool's bounds.
    const target = desiredReplicas || (state && Math.min(Math.max(state.wanted, pool.spec.minReplicas), pool.spec.maxReplicas));
    const scaling = state !== undefined && target !== state.wanted;
    const result = await updateStatus(pool, R.AgentPool, { conditions, counts, settling, converging: converging || scaling }, ctx);
    if (applied.errors.length > 0) throw new Error(applied.errors.join('; '));
    return result;
  },
};

/**
 * The HPA KEDA made for the pool's ScaledObject. It carries the ScaledObject's labels (KEDA copies them), so
 * the HPA informer, which selects the operator's managed-by label, usually has it; it is read where not.
 */
async function kedaHpa(pool: AgentPool, ctx: ReconcileContext): Promise<HorizontalPodAutoscaler | undefined> {
  const namespace = pool.metadata.namespace ?? '';
  const name = kedaHpaName(pool.metadata.name);
  const cached = ctx.children.get(R.HorizontalPodAutoscaler.plural)?.get(namespace, name);
  if (cached && R.isOf(R.HorizontalPodAutoscaler, cached)) return cached;
  return ctx.client.getOrUndefined(R.HorizontalPodAutoscaler, namespace, name);
}

/**
 * Deletes the pool's ScaledObject when it wants none and no informer prunes it: KEDA's CRD appeared after the
 * operator started, so ScaledObjects are applied but not watched. Left, it would keep KEDA's HPA scaling the
 * Deployment beside the pool's own.
 */
async function pruneUnwatchedScaledObject(pool: AgentPool, ctx: ReconcileContext): Promise<void> {
  if (ctx.children.has(R.ScaledObject.plural)) return;
  const namespace = pool.metadata.namespace ?? '';
  const scaled = await ctx.client.getOrUndefined(R.ScaledObject, namespace, pool.metadata.name);
  const ours = scaled?.metadata.ownerReferences?.some((o) => o.controller && o.uid === pool.metadata.uid);
  if (ours && !scaled?.metadata.deletionTimestamp) await ctx.client.delete(R.ScaledObject, namespace, pool.metadata.name);
}
