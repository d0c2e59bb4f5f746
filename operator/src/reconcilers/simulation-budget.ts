// SimulationBudget: a spend budget for the simulation service, reconciled into two ConfigMaps.
//   <name>-budget: the limits the simulation service enforces (operator-owned, data key budget.json).
//   <name>-usage:  the running spend the simulation service reports (data keys `period`, `spentUsd`).
//                  The operator creates it for its labels and owner reference only and never sets its
//                  data, so the service's writes are never overwritten.
// Status carries spent and remaining for the current period and an Exhausted condition.
import type { SimulationBudget, SimulationBudgetSpec } from '../api/v1alpha1/index.ts';
import type { ConditionInput } from '../kube/conditions.ts';
import type { KubeObject } from '../kube/object.ts';
import * as R from '../kube/resources.ts';
import { applyChildren } from './apply-children.ts';
import { childLabels, type DesiredChild, type Reconciler } from './context.ts';
import { updateStatus } from './status.ts';
import { readiness } from './readiness.ts';
import { configMap, obj } from './workload.ts';

export const BUDGET_COMPONENT_LABEL = 'tempora.dev/component';

export function periodKey(period: SimulationBudgetSpec['period'], now: Date): string {
  const iso = now.toISOString();
  return period === 'daily' ? iso.slice(0, 10) : iso.slice(0, 7);
}

export function nextPeriodStart(period: SimulationBudgetSpec['period'], now: Date): Date {
  return period === 'daily'
    ? new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() + 1))
    : new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1));
}

/** Dollars are kept to the cent; floats would otherwise make status flap between equal values. */
function cents(usd: number): number {
  return Math.round(usd * 100) / 100;
}

export function spentThisPeriod(usage: KubeObject | undefined, key: string): number {
  const data = (usage?.data ?? {}) as Record<string, string>;
  if (data.period !== key) return 0;
  const spent = Number(data.spentUsd);
  return Number.isFinite(spent) && spent > 0 ? cents(spent) : 0;
}

export function desiredBudgetChildren(budget: SimulationBudget, exhausted: boolean): DesiredChild[] {
  const { spec } = budget;
  const name = budget.metadata.name;
  const config = configMap(budget, `${name}-budget`, 'simulation-budget', {
    'budget.json': JSON.stringify({
      scope: spec.scope,
      period: spec.period,
      limitUsd: spec.limitUsd,
      perRunMaxUsd: spec.perRunMaxUsd ?? null,
      alertThresholds: spec.alertThresholds,
      exhausted,
    }),
  });
  config.object.metadata.labels![BUDGET_COMPONENT_LABEL] = 'simulation-budget';
  const usage = obj(`${name}-usage`, { ...childLabels(budget, 'simulation-budget-usage'), [BUDGET_COMPONENT_LABEL]: 'simulation-budget-usage' });
  return [config, { resource: R.ConfigMap, object: usage }];
}

export const simulationBudgetReconciler: Reconciler<SimulationBudget> = {
  resource: R.SimulationBudget,
  async reconcile(budget, ctx) {
    const { spec } = budget;
    const now = new Date();
    const key = periodKey(spec.period, now);
    const usage = ctx.children.get(R.ConfigMap.plural)?.get(budget.metadata.namespace, `${budget.metadata.name}-usage`);
    const spent = spentThisPeriod(usage, key);
    const remaining = cents(Math.max(0, spec.limitUsd - spent));
    const exhausted = spent >= spec.limitUsd;
    const applied = await applyChildren(budget, desiredBudgetChildren(budget, exhausted), ctx);
    const crossed = spec.alertThresholds.filter((t) => spec.limitUsd > 0 && spent / spec.limitUsd >= t);
    const exhaustedCondition: ConditionInput = exhausted
      ? { type: 'Exhausted', status: 'True', reason: 'LimitReached', message: `spent $${spent} of $${spec.limitUsd} this ${spec.period} period (${key})` }
      : { type: 'Exhausted', status: 'False', reason: 'WithinBudget', message: `$${remaining} of $${spec.limitUsd} remaining (${key})` };
    await updateStatus(
      budget,
      R.SimulationBudget,
      {
        conditions: [...readiness(applied).conditions, exhaustedCondition],
        fields: { period: key, spentUsd: spent, remainingUsd: remaining, alertsCrossed: crossed },
      },
      ctx,
    );
    if (applied.errors.length > 0) throw new Error(applied.errors.join('; '));
    // The period rolls over at a known instant: come back then so spent resets without any event.
    return { requeueAfterMs: nextPeriodStart(spec.period, now).getTime() - now.getTime() + 1000 };
  },
};
