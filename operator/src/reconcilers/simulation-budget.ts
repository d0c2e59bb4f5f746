// SimulationBudget: a spend budget the simulation service of its TemporaGateway (spec.gatewayRef) enforces.
//   Limits: the budget is the key `<name>.json` of the TemporaGateway's ConfigMap <gateway>-simulation-budgets
//           (gateway.ts), which the simulation pods mount as a directory and read again every few seconds.
//   Spend:  the service keeps the ledger; the operator reads what it reports of the budget
//           (budget-reports.ts) every BUDGET_POLL_SECONDS and at each period boundary, and writes it into
//           status: period, spent, reserved, remaining, the alert thresholds crossed (a Warning Event once
//           per threshold and period) and the Exhausted condition (a Warning Event LimitReached).
// A budget owns no child: the ConfigMaps <name>-budget and <name>-usage of earlier versions are pruned.

import type { SimulationBudget, SimulationBudgetSpec, SimulationBudgetStatus } from '../api/v1alpha1/index.ts';
import type { ConditionInput } from '../kube/conditions.ts';
import * as R from '../kube/resources.ts';
import { applyChildren } from './apply-children.ts';
import type { BudgetReport, ReportProblem } from './budget-reports.ts';
import type { ReconcileContext, Reconciler } from './context.ts';
import { gatewayOf } from './gateway-ref.ts';
import { updateStatus } from './status.ts';

/**
 * A budget as the simulation service reads it (services/simulation/src/domain/budgets.ts). Whether it is
 * exhausted is not in it: the service's ledger decides that, and reports it.
 */
export function budgetJson(spec: SimulationBudgetSpec): string {
  return JSON.stringify({
    scope: spec.scope,
    period: spec.period,
    limitUsd: spec.limitUsd,
    perRunMaxUsd: spec.perRunMaxUsd ?? null,
    alertThresholds: spec.alertThresholds,
  });
}

export function nextPeriodStart(period: SimulationBudgetSpec['period'], now: Date): Date {
  return period === 'daily'
    ? new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() + 1))
    : new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1));
}

/** Until the next poll: BUDGET_POLL_SECONDS, or just past the period boundary when that comes first, so spend resets on time. */
export function untilNextPoll(period: SimulationBudgetSpec['period'], pollMs: number, now: Date): number {
  return Math.min(pollMs, nextPeriodStart(period, now).getTime() - now.getTime() + 1000);
}

/** While the budget is not reported yet (its ConfigMap on its way to the pods, the pods starting), ask more often. */
const UNREPORTED_POLL_MS = 5_000;

/** Whether the service enforces the spec as it stands: a changed budget reaches the pods with the kubelet's delay. */
function enforces(report: BudgetReport, spec: SimulationBudgetSpec): boolean {
  return (
    report.scope === spec.scope &&
    report.period === spec.period &&
    report.limit_usd === spec.limitUsd &&
    report.per_run_max_usd === (spec.perRunMaxUsd ?? null) &&
    JSON.stringify(report.alert_thresholds) === JSON.stringify(spec.alertThresholds)
  );
}

const usd = (n: number) => `$${n}`;
const percent = (fraction: number) => `${Math.round(fraction * 1000) / 10}%`;

function exhaustedCondition(report: BudgetReport): ConditionInput {
  return report.exhausted
    ? {
        type: 'Exhausted',
        status: 'True',
        reason: 'LimitReached',
        message: `spent ${usd(report.spent_usd)} of ${usd(report.limit_usd)} in ${report.current_period}: new runs are refused until the period ends or the limit is raised`,
      }
    : {
        type: 'Exhausted',
        status: 'False',
        reason: 'WithinBudget',
        message: `${usd(report.remaining_usd)} of ${usd(report.limit_usd)} left in ${report.current_period}`,
      };
}

function figures(report: BudgetReport): SimulationBudgetStatus {
  return {
    period: report.current_period,
    spentUsd: report.spent_usd,
    reservedUsd: report.reserved_usd,
    remainingUsd: report.remaining_usd,
    alertsCrossed: report.alerts_crossed,
  };
}

/** Ready, Progressing and Degraded: whether the simulation service enforces this budget as its spec stands. */
function serviceConditions(gateway: string, outcome: { report: BudgetReport; current: boolean } | { problem: ReportProblem }): ConditionInput[] {
  if ('report' in outcome) {
    if (outcome.current) {
      const message = `the simulation service of TemporaGateway ${gateway} enforces it`;
      return [
        { type: 'Ready', status: 'True', reason: 'Enforced', message },
        { type: 'Progressing', status: 'False', reason: 'Enforced', message },
        { type: 'Degraded', status: 'False', reason: 'Healthy', message: 'the simulation service reports the budget' },
      ];
    }
    outcome = {
      problem: {
        reason: 'NotLoaded',
        message: `the simulation service of TemporaGateway ${gateway} still enforces an earlier version of this budget: the ConfigMap ${gateway}-simulation-budgets reaches its pods within about a minute`,
      },
    };
  }
  const { reason, message } = outcome.problem;
  // A key missing or refused needs someone to act; a budget on its way to the pods, or pods starting, does not.
  const failing = reason === 'ServiceKeyRequired' || reason === 'ServiceKeyRefused';
  return [
    { type: 'Ready', status: 'False', reason, message },
    { type: 'Progressing', status: failing ? 'False' : 'True', reason, message },
    failing
      ? { type: 'Degraded', status: 'True', reason, message }
      : { type: 'Degraded', status: 'False', reason: 'Healthy', message: 'nothing fails; waiting for the simulation service' },
  ];
}

/** The last figures and Exhausted condition reported, kept while no new report comes (never reset to 0). */
function lastReported(budget: SimulationBudget): { fields: SimulationBudgetStatus; exhausted: ConditionInput[] } {
  const { period, spentUsd, reservedUsd, remainingUsd, alertsCrossed } = budget.status ?? {};
  const fields = Object.fromEntries(Object.entries({ period, spentUsd, reservedUsd, remainingUsd, alertsCrossed }).filter(([, v]) => v !== undefined));
  const exhausted = (budget.status?.conditions ?? [])
    .filter((c) => c.type === 'Exhausted')
    .map(({ type, status, reason, message }) => ({ type, status, reason, message }));
  return { fields, exhausted };
}

export const simulationBudgetReconciler: Reconciler<SimulationBudget> = {
  resource: R.SimulationBudget,
  async reconcile(budget, ctx) {
    const { spec } = budget;
    const name = budget.metadata.name;
    const applied = await applyChildren(budget, [], ctx);
    if (applied.errors.length > 0) throw new Error(applied.errors.join('; '));
    const last = lastReported(budget);
    const gateway = gatewayOf(ctx, budget.metadata.namespace, spec.gatewayRef);
    if (!gateway) {
      const message = `TemporaGateway ${spec.gatewayRef} (spec.gatewayRef) does not exist in this namespace: no simulation service enforces this budget`;
      const refused: ConditionInput[] = ['Ready', 'Progressing'].map((type) => ({ type, status: 'False', reason: 'GatewayNotFound', message }));
      await updateStatus(
        budget,
        R.SimulationBudget,
        { conditions: [...refused, { type: 'Degraded', status: 'True', reason: 'GatewayNotFound', message }, ...last.exhausted], fields: last.fields },
        ctx,
      );
      // The TemporaGateway's coming brings the budget back (operator.ts maps TemporaGateway events to the budgets naming it).
      return;
    }
    const reading = await ctx.budgetReports.read(gateway, name);
    const now = new Date();
    if ('problem' in reading) {
      await updateStatus(
        budget,
        R.SimulationBudget,
        { conditions: [...serviceConditions(gateway.metadata.name, reading), ...last.exhausted], fields: last.fields },
        ctx,
      );
      return { requeueAfterMs: Math.min(UNREPORTED_POLL_MS, untilNextPoll(spec.period, ctx.budgetPollMs, now)) };
    }
    const { report } = reading;
    const current = enforces(report, spec);
    await updateStatus(
      budget,
      R.SimulationBudget,
      { conditions: [...serviceConditions(gateway.metadata.name, { report, current }), exhaustedCondition(report)], fields: figures(report) },
      ctx,
    );
    await recordCrossedAlerts(budget, report, ctx);
    return { requeueAfterMs: current ? untilNextPoll(spec.period, ctx.budgetPollMs, now) : Math.min(UNREPORTED_POLL_MS, ctx.budgetPollMs) };
  },
};

/**
 * A Warning Event for each alert threshold the period's spend has newly reached: not in status for this
 * period before this report, nor recorded by this process already (a reconcile may read the cache before
 * the watch brought the status just written). So each threshold is announced once per period, across
 * restarts too, since status keeps what was crossed.
 */
async function recordCrossedAlerts(budget: SimulationBudget, report: BudgetReport, ctx: ReconcileContext): Promise<void> {
  const uid = budget.metadata.uid ?? '';
  const before = budget.status?.period === report.current_period ? (budget.status.alertsCrossed ?? []) : [];
  const recorded = ctx.budgetAlerts.get(uid);
  const announced = new Set([...before, ...(recorded?.period === report.current_period ? recorded.thresholds : [])]);
  const crossed = report.alerts_crossed.filter((t) => !announced.has(t));
  ctx.budgetAlerts.set(uid, { period: report.current_period, thresholds: report.alerts_crossed });
  const spent = report.limit_usd > 0 ? report.spent_usd / report.limit_usd : 1;
  for (const threshold of crossed) {
    await ctx.events.record(
      budget,
      'Warning',
      'AlertThresholdCrossed',
      `spent ${usd(report.spent_usd)} of ${usd(report.limit_usd)} (${percent(spent)}) in ${report.current_period}: past the ${percent(threshold)} alert threshold`,
    );
  }
}
