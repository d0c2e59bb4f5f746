// The control plane's own share of the benchmark: the same custom resources and the very children the
// operator would create for them, applied with no operator running, as fast as 32 + 32 concurrent
// requests allow (Services first, since kube-apiserver allocates cluster IPs one at a time), until
// kube-controller-manager has observed every Deployment. No operator can bring its custom resources to
// Ready sooner than this: it must do all of this and, besides, run its reconciles and write each custom
// resource's status and Event, which this leaves out.
import type { Cluster } from '../../operator/test/cluster.ts';
import { applyAs, waitFor } from '../../operator/test/cluster.ts';
import type { AgentPool, Gateway, GraphWorker } from '../../operator/src/api/v1alpha1/index.ts';
import type { KubeClient } from '../../operator/src/kube/client.ts';
import type { KubeObject } from '../../operator/src/kube/object.ts';
import * as R from '../../operator/src/kube/resources.ts';
import { collectionPath, type ResourceType } from '../../operator/src/kube/resources.ts';
import { desiredAgentPoolChildren } from '../../operator/src/reconcilers/agent-pool.ts';
import { childObject } from '../../operator/src/reconcilers/apply-children.ts';
import type { DesiredChild } from '../../operator/src/reconcilers/context.ts';
import { desiredGatewayChildren } from '../../operator/src/reconcilers/gateway.ts';
import { desiredGraphWorkerChildren } from '../../operator/src/reconcilers/graph-worker.ts';

const CONCURRENCY = 32;

/** What the operator's reconcilers apply for a custom resource, as the API server returned it (defaults filled in). */
function childrenOf(owner: KubeObject): DesiredChild[] {
  switch (owner.kind) {
    case 'Gateway':
      return desiredGatewayChildren(owner as Gateway, true);
    case 'GraphWorker':
      return desiredGraphWorkerChildren(owner as GraphWorker, (owner as GraphWorker).spec.role !== 'daily');
    case 'AgentPool':
      return desiredAgentPoolChildren(owner as AgentPool, { queueMetric: false, podMonitor: true });
    case 'SimulationBudget':
      // A budget owns no child: it is a key of its Gateway's ConfigMap.
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
  /** The floor: every Deployment observed by kube-controller-manager at the generation applied. */
  allObservedSeconds: number;
}

export async function controlPlaneFloor(cluster: Cluster, operatorClient: KubeClient, objs: KubeObject[]): Promise<FloorFigures> {
  const pending = new Map<string, number>();
  const observed = new Map<string, number>();
  const watching = new AbortController();
  const watch = cluster.admin
    .watch(collectionPath(R.Deployment, 'default'), {}, watching.signal, (_type, d) => {
      observed.set(d.metadata.name, (d.status?.observedGeneration as number | undefined) ?? 0);
    })
    .catch((error: unknown) => {
      if (!watching.signal.aborted) throw error;
    });
  const started = performance.now();
  const elapsed = () => +((performance.now() - started) / 1000).toFixed(1);
  const owners = [...objs];
  const children: Array<{ resource: ResourceType; obj: KubeObject }> = [];
  let ownersLeft = owners.length;
  let servicesAppliedSeconds = 0;
  let childCount = 0;
  const applyOwners = async () => {
    for (let o = owners.shift(); o; o = owners.shift()) {
      const live = await applyAs(cluster.admin, o);
      for (const child of childrenOf(live)) {
        const next = { resource: child.resource, obj: childObject(live, child) };
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
      const live = await operatorClient.apply(next.resource, next.obj);
      if (live.kind === 'Deployment') pending.set(live.metadata.name, live.metadata.generation ?? 1);
      if (live.kind === 'Service') servicesAppliedSeconds = elapsed();
    }
  };
  await Promise.all([...Array.from({ length: CONCURRENCY }, applyOwners), ...Array.from({ length: CONCURRENCY }, applyChildren)]);
  const childrenAppliedSeconds = elapsed();
  await waitFor(
    'every Deployment observed',
    async () => {
      for (const [name, generation] of pending) if ((observed.get(name) ?? 0) >= generation) pending.delete(name);
      return pending.size === 0;
    },
    600_000,
    50,
  );
  const allObservedSeconds = elapsed();
  watching.abort();
  await watch;
  return { customResources: objs.length, children: childCount, servicesAppliedSeconds, childrenAppliedSeconds, allObservedSeconds };
}
