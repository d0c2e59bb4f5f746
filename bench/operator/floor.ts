// The control plane's own share of the benchmark: the same custom resources and the very children the
// operator would create for them, applied with no operator running, as fast as 16 + 16 concurrent
// requests allow (Services first, since kube-apiserver allocates cluster IPs one at a time), until every
// Deployment is what Ready waits for (docs/operator.md): observed by kube-controller-manager at the
// generation applied, with its pods available (an AgentPool's at its minimum, which its HPA scales it to).
// Pods become available as the run's kubelet (the tests' stand-in) reports them. No operator can bring
// its custom resources to Ready sooner than this: it must do all of this and, besides, run its reconciles
// and write each custom resource's status and Event, which this leaves out.

import type { AgentPool, GraphWorker, TemporaGateway } from '../../operator/src/api/v1alpha1/index.ts';
import type { KubeClient } from '../../operator/src/kube/client.ts';
import type { KubeObject } from '../../operator/src/kube/object.ts';
import * as R from '../../operator/src/kube/resources.ts';
import { collectionPath, type ResourceType } from '../../operator/src/kube/resources.ts';
import { desiredAgentPoolChildren } from '../../operator/src/reconcilers/agent-pool.ts';
import { childObject } from '../../operator/src/reconcilers/apply-children.ts';
import type { DesiredChild } from '../../operator/src/reconcilers/context.ts';
import { desiredGatewayChildren } from '../../operator/src/reconcilers/gateway.ts';
import { desiredGraphWorkerChildren } from '../../operator/src/reconcilers/graph-worker.ts';
import type { Cluster } from '../../operator/test/cluster.ts';
import { applyAs } from '../../operator/test/cluster.ts';
import { waitFor } from '../../test/support/wait.ts';

/**
 * Requests in flight for owners, and as many for children: as many as the operator's reconciles (4 workers
 * for each of its 4 controllers). More is slower, not faster: kube-apiserver and kube-controller-manager
 * share the 2 cores with the requests, and 32 + 32 took 43-63 s where 16 + 16 took 35-38 s (8 + 8: 42 s).
 */
const CONCURRENCY = 16;

/** What the operator's reconcilers apply for a custom resource, as the API server returned it (defaults filled in). */
function childrenOf(owner: KubeObject): DesiredChild[] {
  switch (owner.kind) {
    case 'TemporaGateway':
      return desiredGatewayChildren(owner as TemporaGateway, true);
    case 'GraphWorker':
      return desiredGraphWorkerChildren(owner as GraphWorker, (owner as GraphWorker).spec.role !== 'daily');
    case 'AgentPool':
      return desiredAgentPoolChildren(owner as AgentPool, { queueMetric: false, podMonitor: true, keda: false });
    case 'SimulationBudget':
      // A budget owns no child: it is a key of its TemporaGateway's ConfigMap.
      return [];
    default:
      throw new Error(`no children known for ${owner.kind}`);
  }
}

export interface FloorFigures {
  customResources: number;
  children: number;
  /** When the last Service was applied. */
  servicesAppliedSeconds: number;
  childrenAppliedSeconds: number;
  /** Every Deployment observed by kube-controller-manager at the generation applied. */
  allObservedSeconds: number;
  /** The floor: besides, every Deployment's pods available. */
  allAvailableSeconds: number;
}

interface DeploymentState {
  observedGeneration: number;
  availableReplicas: number;
  replicas: number;
}

export async function controlPlaneFloor(cluster: Cluster, operatorClient: KubeClient, objs: KubeObject[]): Promise<FloorFigures> {
  /** Per Deployment: the generation applied, and the pods it must have available (unset: its replicas). */
  const pending = new Map<string, { generation: number; available?: number }>();
  const observed = new Map<string, DeploymentState>();
  const watching = new AbortController();
  const watch = cluster.admin
    .watch(collectionPath(R.Deployment, 'default'), {}, watching.signal, (event) => {
      if (event.type === 'ERROR' || event.type === 'BOOKMARK') return;
      const d = event.object;
      const status = (d.status ?? {}) as Partial<DeploymentState>;
      observed.set(d.metadata.name, {
        observedGeneration: status.observedGeneration ?? 0,
        availableReplicas: status.availableReplicas ?? 0,
        replicas: (d.spec as { replicas?: number } | undefined)?.replicas ?? 1,
      });
    })
    .catch((error: unknown) => {
      if (!watching.signal.aborted) throw error;
    });
  const started = performance.now();
  const elapsed = () => +((performance.now() - started) / 1000).toFixed(1);
  const owners = [...objs];
  const children: Array<{ resource: ResourceType; obj: KubeObject; available?: number; createWith?: () => Record<string, unknown> }> = [];
  let ownersLeft = owners.length;
  let servicesAppliedSeconds = 0;
  let childCount = 0;
  const applyOwners = async () => {
    for (let o = owners.shift(); o; o = owners.shift()) {
      const live = await applyAs(cluster.admin, o);
      for (const child of childrenOf(live)) {
        // An AgentPool's Deployment counts as available with the pool's minimum (its HPA's to reach).
        const available = live.kind === 'AgentPool' ? (live as AgentPool).spec.minReplicas : undefined;
        const next = {
          resource: child.resource,
          obj: childObject(live, child),
          createWith: child.createWith,
          ...(available !== undefined ? { available } : {}),
        };
        childCount++;
        if (child.resource === R.Service) children.unshift(next);
        else children.push(next);
      }
      ownersLeft--;
    }
  };
  const applyChildren = async () => {
    for (;;) {
      const next = children.shift();
      if (!next) {
        if (ownersLeft === 0) return;
        await new Promise((r) => setTimeout(r, 5));
        continue;
      }
      // A child made once (the signing key's Secret) is created, as the operator does, never applied.
      const live = next.createWith
        ? await operatorClient.create(next.resource, next.obj.metadata.namespace ?? '', { ...next.obj, ...next.createWith() })
        : await operatorClient.apply(next.resource, next.obj);
      if (live.kind === 'Deployment')
        pending.set(live.metadata.name, { generation: live.metadata.generation ?? 1, ...(next.available !== undefined ? { available: next.available } : {}) });
      if (live.kind === 'Service') servicesAppliedSeconds = elapsed();
    }
  };
  await Promise.all([...Array.from({ length: CONCURRENCY }, applyOwners), ...Array.from({ length: CONCURRENCY }, applyChildren)]);
  const childrenAppliedSeconds = elapsed();
  let allObservedSeconds = 0;
  await waitFor(
    'every Deployment observed with its pods available',
    async () => {
      let unobserved = 0;
      for (const [name, want] of pending) {
        const d = observed.get(name);
        if (!d || d.observedGeneration < want.generation) unobserved++;
        else if (d.availableReplicas >= (want.available ?? d.replicas)) pending.delete(name);
      }
      if (unobserved === 0 && !allObservedSeconds) allObservedSeconds = elapsed();
      return pending.size === 0;
    },
    { timeoutMs: 600_000, intervalMs: 50 },
  );
  const allAvailableSeconds = elapsed();
  watching.abort();
  await watch;
  return { customResources: objs.length, children: childCount, servicesAppliedSeconds, childrenAppliedSeconds, allObservedSeconds, allAvailableSeconds };
}
