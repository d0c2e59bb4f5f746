// AgentPool: the generation service's agent workers as a Deployment scaled by an autoscaling/v2
// HorizontalPodAutoscaler (and a PodMonitor when the Prometheus Operator is installed). The HPA owns the
// Deployment's replicas, so the operator never sets them.
import type { AgentPool } from '../api/v1alpha1/index.ts';
import * as R from '../kube/resources.ts';
import { applyChildren } from './apply-children.ts';
import { childLabels, type DesiredChild, type Reconciler } from './context.ts';
import { updateStatus } from './status.ts';
import { peerUrls } from './platform-services.ts';
import { readiness } from './readiness.ts';
import { configMap, envFromSecretKey, modelSettings, obj, workerDeployment } from './workload.ts';

/** The external metric a metrics adapter serves from the generation service's queue. */
export const QUEUE_DEPTH_METRIC = 'tempora_generation_queue_depth';

/** The optional APIs an AgentPool's children depend on. */
export interface AgentPoolFeatures {
  /** A metrics adapter is registered: the HPA also scales on queue depth. */
  queueMetric: boolean;
  /** The PodMonitor CRD is served. */
  podMonitor: boolean;
}

export function desiredAgentPoolChildren(pool: AgentPool, features: AgentPoolFeatures): DesiredChild[] {
  const { spec } = pool;
  const name = pool.metadata.name;
  const component = 'generation-agents';
  const config = {
    AGENT_POOL: 'redis',
    AGENT_POOL_CONCURRENCY: String(spec.concurrency),
    ...modelSettings(spec.models),
    ...peerUrls(spec.gatewayRef, pool.metadata.namespace ?? 'default', ['generation', 'billing']),
  };
  const envFrom: Record<string, unknown>[] = [
    { configMapRef: { name } },
    ...(spec.providerSecrets ?? []).map((s) => ({ secretRef: { name: s } })),
  ];
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
        env: envFromSecretKey('REDIS_URL', spec.redis),
        envFrom,
        resources: spec.resources,
        config,
      },
      features.podMonitor,
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

export const agentPoolReconciler: Reconciler<AgentPool> = {
  resource: R.AgentPool,
  async reconcile(pool, ctx) {
    const [queueMetric, podMonitor] = await Promise.all([ctx.features.externalMetrics(), ctx.features.serves(R.PodMonitor)]);
    const applied = await applyChildren(pool, desiredAgentPoolChildren(pool, { queueMetric, podMonitor }), ctx);
    const { conditions, settling } = readiness(applied);
    const dep = applied.live.get(`deployments/${pool.metadata.name}`);
    const hpa = applied.live.get(`horizontalpodautoscalers/${pool.metadata.name}`);
    const fields = {
      replicas: (dep?.status as { replicas?: number } | undefined)?.replicas ?? 0,
      desiredReplicas: (hpa?.status as { desiredReplicas?: number } | undefined)?.desiredReplicas ?? 0,
    };
    await updateStatus(pool, R.AgentPool, { conditions, fields, settling }, ctx);
    if (applied.errors.length > 0) throw new Error(applied.errors.join('; '));
  },
};
