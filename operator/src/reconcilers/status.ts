// Writing a custom resource's status only when it changed, with an Event per condition transition.
import { mergeConditions, type Condition, type ConditionInput } from '../kube/conditions.ts';
import type { KubeObject } from '../kube/object.ts';
import type { ResourceType } from '../kube/resources.ts';
import type { ReconcileContext } from './context.ts';

export interface StatusUpdate {
  conditions: ConditionInput[];
  fields?: Record<string, unknown>;
  /** Readiness's `settling`: the reconcile that the children's watch events trigger writes status instead. */
  settling?: boolean;
}

/** Writes status when it differs from the live status, and records an Event for each condition whose status changed. */
export async function updateStatus(owner: KubeObject, resource: ResourceType, update: StatusUpdate, ctx: ReconcileContext): Promise<void> {
  if (update.settling) return;
  const previous = (owner.status?.conditions ?? []) as Condition[];
  const generation = owner.metadata.generation ?? 0;
  const conditions = mergeConditions(previous, update.conditions, generation, new Date());
  const status: Record<string, unknown> = { ...update.fields, observedGeneration: generation, conditions };
  const live = owner.status ?? {};
  if (sameJson(status, live)) return;
  // A merge patch keeps keys it does not mention; null removes the ones no longer reported (e.g. url).
  const patch: Record<string, unknown> = { ...status };
  for (const key of Object.keys(live)) if (!(key in status)) patch[key] = null;
  await ctx.client.patchStatus(resource, owner.metadata.namespace ?? '', owner.metadata.name, patch);
  for (const c of conditions) {
    const before = previous.find((p) => p.type === c.type);
    // Unchanged, or starting out False (a new resource that is not Ready yet is not news). Progressing
    // only mirrors Ready, so its transitions would double every Event. A Degraded that stays True for a
    // new reason (a pod that crashed now cannot be pulled) is news.
    const newFailure = c.type === 'Degraded' && c.status === 'True' && before?.status === 'True' && before.reason !== c.reason;
    if (!newFailure && (c.type === 'Progressing' || before?.status === c.status || (!before && c.status === 'False'))) continue;
    const warning = (c.type === 'Degraded' || c.type === 'Exhausted') && c.status === 'True';
    await ctx.events.record(owner, warning ? 'Warning' : 'Normal', c.reason, `${c.type}=${c.status}: ${c.message}`);
  }
}

function sameJson(a: unknown, b: unknown): boolean {
  return JSON.stringify(sortKeys(a)) === JSON.stringify(sortKeys(b));
}

function sortKeys(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(sortKeys);
  if (v && typeof v === 'object') {
    return Object.fromEntries(Object.keys(v).sort().map((k) => [k, sortKeys((v as Record<string, unknown>)[k])]));
  }
  return v;
}
