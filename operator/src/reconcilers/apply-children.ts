// Applying children under the operator's field manager, only when they drifted, and pruning the ones
// an owner no longer wants.
import { isConflict } from '../kube/client.ts';
import { needsApply, withSpecHash } from '../kube/drift.ts';
import type { KubeObject } from '../kube/object.ts';
import { apiVersionOf, isOf, type ResourceType } from '../kube/resources.ts';
import { type DesiredChild, MANAGED_BY, MANAGED_BY_LABEL, ownerReference, type ReconcileContext } from './context.ts';

/** The object as the operator applies it: owner reference, managed-by label and spec hash added. */
export function childObject(owner: KubeObject, child: DesiredChild): KubeObject {
  const meta = child.object.metadata;
  return withSpecHash({
    ...child.object,
    apiVersion: apiVersionOf(child.resource),
    kind: child.resource.kind,
    metadata: {
      ...meta,
      namespace: owner.metadata.namespace,
      labels: { ...meta.labels, [MANAGED_BY_LABEL]: MANAGED_BY },
      ownerReferences: [ownerReference(owner)],
    },
  });
}

export interface AppliedChildren {
  /** The live state of each desired child after this pass, keyed `<plural>/<name>`. */
  live: Map<string, KubeObject>;
  errors: string[];
  /** A watched child was written in this pass, so its watch event will bring the owner back. */
  wroteWatched: boolean;
  /** For each live Deployment, the generation its controller must have observed (see readiness.ts). */
  observeAt: Map<string, number>;
}

/** The live state of the child of this type and name after the pass, typed by its resource. */
export function liveChild<T extends KubeObject>(applied: AppliedChildren, r: ResourceType<T>, name: string): T | undefined {
  const live = applied.live.get(`${r.plural}/${name}`);
  return live && isOf(r, live) ? live : undefined;
}

export async function applyChildren(owner: KubeObject, desired: DesiredChild[], ctx: ReconcileContext): Promise<AppliedChildren> {
  const result: AppliedChildren = { live: new Map(), errors: [], wroteWatched: false, observeAt: new Map() };
  const wanted = new Set<string>();
  await Promise.all(
    desired.map(async (child) => {
      const obj = childObject(owner, child);
      const key = `${child.resource.plural}/${obj.metadata.name}`;
      wanted.add(key);
      try {
        // A child type without an informer (a ServiceMonitor or PodMonitor whose CRD appeared after start-up) is read.
        const informer = ctx.children.get(child.resource.plural);
        const cached = informer
          ? informer.get(obj.metadata.namespace, obj.metadata.name)
          : await ctx.client.getOrUndefined(child.resource, obj.metadata.namespace ?? '', obj.metadata.name);
        if (child.createWith) {
          if (!cached) {
            await createOnce(ctx, child, { ...obj, ...child.createWith() });
            result.wroteWatched = true;
          }
          result.live.set(key, cached ?? obj);
          return;
        }
        if (cached && !needsApply(obj, cached)) {
          result.live.set(key, cached);
          const uid = cached.metadata.uid ?? '';
          if (cached.kind === 'Deployment') result.observeAt.set(key, ctx.appliedGenerations.get(uid) ?? cached.metadata.generation ?? 1);
          return;
        }
        const live = await ctx.client.apply(child.resource, obj);
        result.live.set(key, live);
        if (informer) result.wroteWatched = true;
        if (live.kind === 'Deployment') {
          ctx.appliedGenerations.set(live.metadata.uid ?? '', live.metadata.generation ?? 1);
          result.observeAt.set(key, live.metadata.generation ?? 1);
        }
      } catch (err) {
        result.errors.push(`${child.resource.kind} ${obj.metadata.name}: ${String(err)}`);
      }
    }),
  );
  await pruneChildren(owner, wanted, ctx, result);
  return result;
}

/** Creates a child that is never applied; one that exists already (the cache was behind) is kept as it is. */
async function createOnce(ctx: ReconcileContext, child: DesiredChild, obj: KubeObject): Promise<void> {
  try {
    await ctx.client.create(child.resource, obj.metadata.namespace ?? '', obj);
  } catch (err) {
    if (!isConflict(err)) throw err;
  }
}

/** Deletes watched children this owner controls but no longer wants (a TemporaGateway's Ingress once spec.ingress is removed). */
async function pruneChildren(owner: KubeObject, wanted: Set<string>, ctx: ReconcileContext, result: AppliedChildren): Promise<void> {
  for (const [plural, informer] of ctx.children) {
    for (const child of informer.controlledBy(owner.metadata.uid ?? '')) {
      if (child.metadata.deletionTimestamp || wanted.has(`${plural}/${child.metadata.name}`)) continue;
      try {
        await ctx.client.delete(informer.resource, child.metadata.namespace ?? '', child.metadata.name);
        ctx.appliedGenerations.delete(child.metadata.uid ?? '');
        result.wroteWatched = true;
      } catch (err) {
        result.errors.push(`delete ${child.kind} ${child.metadata.name}: ${String(err)}`);
      }
    }
  }
}
