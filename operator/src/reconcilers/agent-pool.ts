// AgentPool: the generation service's agent workers as a Deployment scaled by an autoscaling/v2
// HorizontalPodAutoscaler (and a PodMonitor when the Prometheus Operator is installed). The HPA owns the
// Deployment's replicas, so the operator never sets them. The pool serves the TemporaGateway it names: that
// TemporaGateway's generation pods put their agent tasks on the pool's Redis stream (gateway.ts), and the pool
// takes from the TemporaGateway what it does not set itself (Redis, provider credentials, log level, tracing).
import type { AgentPool, TemporaGateway } from '../api/v1alpha1/index.ts';
import * as R from '../kube/resources.ts';
import { applyChildren, liveChild } from './apply-children.ts';
import { childLabels, type DesiredChild, type Reconciler } from './context.ts';
import { gatewayOf, poolRedis, redisKeyPrefix, servingPool } from './gateway-ref.ts';
import { peerUrls } from './platform-services.ts';
import { type Blocked, deploymentState, readiness } from './readiness.ts';
import { updateStatus } from './status.ts';
import { configMap, envFromSecretKey, modelSettings, obj, workerDeployment } from './workload.ts';

/**
 * The external metric a metrics adapter serves from the generation service's queue, selected by the
 * label `pool`: the generation pods and the pool's workers export it with the pool's name (AGENT_POOL_NAME).
 */
export const QUEUE_DEPTH_METRIC = 'tempora_generation_queue_depth';

/** The optional APIs an AgentPool's children depend on. */
export interface AgentPoolFeatures {
  /** A metrics adapter is registered: the HPA also scales on queue depth. */
  queueMetric: boolean;
  /** The PodMonitor CRD is served. */
  podMonitor: boolean;
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
  const envFrom: Record<string, unknown>[] = [{ configMapRef: { name } }, ...providers.map((s) => ({ secretRef: { name: s } }))];
  const metrics: Record<string, unknown>[] = [
    { type: 'Resource', resource: { name: 'cpu', target: { type: 'Utilization', averageUtilization: spec.cpuTargetPercent } } },
  ];
  if (features.queueMetric) {
    metrics.push({
      type: 'External',
      external: {
        metric: { name: QUEUE_DEPTH_METRIC, selector: { matchLabels: { pool: name } } },
        target: { type: 'AverageValue', averageValue: String(spec.queueDepthTarget) },
      },
    });
  }
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
    {
      resource: R.HorizontalPodAutoscaler,
      object: obj(name, childLabels(pool, component), {
        scaleTargetRef: { apiVersion: 'apps/v1', kind: 'Deployment', name },
        minReplicas: spec.minReplicas,
        maxReplicas: spec.maxReplicas,
        metrics,
      }),
    },
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
    const [queueMetric, podMonitor] = await Promise.all([ctx.features.externalMetrics(), ctx.features.serves(R.PodMonitor)]);
    // A pool that cannot run keeps no workload: its children are pruned until it can.
    const applied = await applyChildren(pool, blocked ? [] : desiredAgentPoolChildren(pool, { queueMetric, podMonitor }, gateway), ctx);
    const depKey = `deployments/${pool.metadata.name}`;
    const { conditions, settling, converging } = readiness(applied, {
      pods: ctx.pods.controlledBy(pool.metadata.uid ?? ''),
      // The HPA adds pods as the queue grows; the pool is Ready while its minimum is available.
      minAvailable: new Map([[depKey, pool.spec.minReplicas]]),
      blocked,
    });
    const dep = liveChild(applied, R.Deployment, pool.metadata.name);
    const state = dep ? deploymentState(dep) : undefined;
    const desiredReplicas = liveChild(applied, R.HorizontalPodAutoscaler, pool.metadata.name)?.status?.desiredReplicas ?? 0;
    const counts = { replicas: state?.replicas ?? 0, availableReplicas: state?.availableReplicas ?? 0, desiredReplicas };
    // The HPA has yet to bring the Deployment to its count: the pool converges too. Until its first sync
    // (up to 15 s after it is made) the HPA desires 0; it then brings the Deployment (one pod by default)
    // into the pool's bounds.
    const target = desiredReplicas || (state && Math.min(Math.max(state.wanted, pool.spec.minReplicas), pool.spec.maxReplicas));
    const scaling = state !== undefined && target !== state.wanted;
    const result = await updateStatus(pool, R.AgentPool, { conditions, counts, settling, converging: converging || scaling }, ctx);
    if (applied.errors.length > 0) throw new Error(applied.errors.join('; '));
    return result;
  },
};
