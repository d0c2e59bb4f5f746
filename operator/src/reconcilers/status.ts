// Writing a custom resource's status only when it changed, with an Event per condition transition.
import type { Condition } from '../api/v1alpha1/index.ts';
import { type ConditionInput, mergeConditions } from '../kube/conditions.ts';
import { isRecord, type KubeObject } from '../kube/object.ts';
import type { ResourceType } from '../kube/resources.ts';
import type { ReconcileContext, ReconcileResult } from './context.ts';

/**
 * How long a change of counts alone may wait while the workloads converge. Well above a
 * HorizontalPodAutoscaler's first sync (15 s by default, later on a busy kube-controller-manager) plus a
 * pod's start, so that a pool scaled from one pod to its minimum writes status twice (not Ready, then
 * Ready) rather than at every step; counts stuck on their way (pods that stay Pending) still show within
 * a minute.
 */
export const COUNTS_HOLD_MS = 60_000;

export interface StatusUpdate {
  conditions: ConditionInput[];
  fields?: Record<string, unknown>;
  /** Fields that follow the children's replica counts: while `converging`, a change of these alone may wait. */
  counts?: Record<string, unknown>;
  /** Readiness's `settling`: the reconcile that the children's watch events trigger writes status instead. */
  settling?: boolean;
  /** The workloads are on their way to the counts they want (readiness's `converging`, an autoscaler's pending scale). */
  converging?: boolean;
}

/**
 * Writes status when it differs from the live status, and records an Event for each condition whose status
 * changed. While the workloads converge, a change that is no news (no condition's status, no Degraded
 * reason, no observedGeneration, no field but the counts: only the counts and which step the rollout is
 * at) waits up to COUNTS_HOLD_MS, for the counts to settle (their watch events bring the owner back here)
 * or for news; the result requeues the owner for the end of the wait.
 */
/** A custom resource, whose status has conditions (api/v1alpha1). */
type Owner = KubeObject & { status?: { conditions?: Condition[] } };

export async function updateStatus<T extends Owner>(
  owner: T,
  resource: ResourceType<T>,
  update: StatusUpdate,
  ctx: ReconcileContext,
): Promise<ReconcileResult | undefined> {
  if (update.settling) return undefined;
  const previous = owner.status?.conditions ?? [];
  const generation = owner.metadata.generation ?? 0;
  const now = Date.now();
  const conditions = mergeConditions(previous, update.conditions, generation, new Date(now));
  const status: Record<string, unknown> = { ...update.fields, ...update.counts, observedGeneration: generation, conditions };
  const live = owner.status ?? {};
  const uid = owner.metadata.uid ?? '';
  if (sameJson(status, live)) {
    ctx.heldStatus.delete(uid);
    return undefined;
  }
  if (update.converging && sameJson(news(status, conditions, update.counts), news(live, previous, update.counts))) {
    const since = ctx.heldStatus.get(uid) ?? now;
    const wait = since + COUNTS_HOLD_MS - now;
    if (wait > 0) {
      ctx.heldStatus.set(uid, since);
      return { requeueAfterMs: wait };
    }
  }
  ctx.heldStatus.delete(uid);
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
  return undefined;
}

/**
 * The news in a status while its workloads converge: every field but the counts, and each condition's
 * status; of Ready and Progressing not the reason and message that say which step the rollout is at
 * (the Deployment observed, pods starting), of Degraded also why (a new failure is news).
 */
function news(status: Record<string, unknown>, conditions: Condition[], counts: Record<string, unknown> | undefined): Record<string, unknown> {
  const rest = Object.fromEntries(Object.entries(status).filter(([key]) => !(counts && key in counts)));
  return {
    ...rest,
    conditions: conditions.map((c) => ({
      type: c.type,
      status: c.status,
      observedGeneration: c.observedGeneration,
      ...(c.type === 'Degraded' ? { reason: c.reason } : {}),
    })),
  };
}

function sameJson(a: unknown, b: unknown): boolean {
  return JSON.stringify(sortKeys(a)) === JSON.stringify(sortKeys(b));
}

function sortKeys(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(sortKeys);
  if (isRecord(v)) {
    return Object.fromEntries(
      Object.keys(v)
        .sort()
        .map((k) => [k, sortKeys(v[k])]),
    );
  }
  return v;
}
