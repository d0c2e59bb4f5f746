import { z } from 'zod';
import type { Mode } from './vocabulary.ts';

/**
 * A SimulationBudget as the operator writes it (operator/src/reconcilers/simulation-budget.ts, data key
 * `budget.json` of the `<name>-budget` ConfigMap). `exhausted` is the operator's reading of what this
 * service reports, so the service's own ledger, not that flag, decides.
 */
export const BudgetSpecSchema = z.object({
  scope: z.string().regex(/^(global|(account|template|mode):[A-Za-z0-9_.-]{1,128})$/, 'global, account:<id>, template:<name> or mode:<mode>'),
  period: z.enum(['daily', 'monthly']).default('daily'),
  limitUsd: z.number().min(0).max(1_000_000),
  perRunMaxUsd: z.number().min(0).nullable().optional(),
  alertThresholds: z.array(z.number().gt(0).max(1)).max(10).default([0.5, 0.8, 1]),
  exhausted: z.boolean().optional(),
});
export type BudgetSpec = z.output<typeof BudgetSpecSchema>;

export interface Budget extends BudgetSpec {
  name: string;
}

export const BUDGET_NAME = /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/;

export const usdToMicros = (usd: number) => Math.round(usd * 1_000_000);
export const microsToUsd = (micros: number) => Math.round(micros) / 1_000_000;

/** The operator's period keys: `YYYY-MM-DD` (daily) or `YYYY-MM` (monthly), in UTC. */
export function periodKey(period: BudgetSpec['period'], now: Date): string {
  const iso = now.toISOString();
  return period === 'daily' ? iso.slice(0, 10) : iso.slice(0, 7);
}

export interface RunScope {
  owner: string;
  template: string | null;
  mode: Mode;
}

/** Whether a budget covers a run: every run (global), one account, one template or one mode. */
export function covers(budget: BudgetSpec, run: RunScope): boolean {
  if (budget.scope === 'global') return true;
  const [kind, value] = [budget.scope.slice(0, budget.scope.indexOf(':')), budget.scope.slice(budget.scope.indexOf(':') + 1)];
  if (kind === 'account') return value === run.owner;
  if (kind === 'template') return value === run.template;
  return value.toUpperCase() === run.mode;
}
