// Status conditions in the metav1.Condition shape. lastTransitionTime only moves when status changes,
// so recomputing the same conditions yields an identical status and therefore no status write.

export interface Condition {
  type: string;
  status: 'True' | 'False' | 'Unknown';
  reason: string;
  message: string;
  observedGeneration: number;
  lastTransitionTime: string;
}

export type ConditionInput = Omit<Condition, 'lastTransitionTime' | 'observedGeneration'>;

/** `previous`: the conditions in status, where observedGeneration may be missing (a status written by hand). */
export function mergeConditions(
  previous: readonly Pick<Condition, 'type' | 'status' | 'lastTransitionTime'>[] | undefined,
  next: ConditionInput[],
  generation: number,
  now: Date,
): Condition[] {
  return next.map((c) => {
    const old = previous?.find((p) => p.type === c.type);
    const changed = !old || old.status !== c.status;
    return {
      ...c,
      observedGeneration: generation,
      lastTransitionTime: changed ? now.toISOString().replace(/\.\d{3}Z$/, 'Z') : old.lastTransitionTime,
    };
  });
}
