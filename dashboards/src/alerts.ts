/**
 * The platform's Prometheus rules: recording rules for the SLOs and every alert, each alert with its
 * runbook and its promtool unit tests in one place, so an alert cannot ship without either. build.ts
 * writes the plain rule file, the promtool test file and docs/runbooks/<alert>.md from this.
 *
 * The alerts are written per component in alerts/ (as the dashboards are per service) and listed here in
 * the order the rule file, its tests and the runbooks have always had, so a move changes no output.
 *
 * Every selector names the components whose series it reads (components.ts), so the rules see Tempora's
 * targets only; rules.ts adds to each firing case its twin from another workload, which must stay silent.
 */
import { billingOutboxStuck, billingRefusals } from './alerts/billing.ts';
import { creditRefundSpike, upstreamFailing } from './alerts/gateway.ts';
import { agentPoolBacklog, modelProviderFailing } from './alerts/generation.ts';
import { graphWorkerBudgetExhausted } from './alerts/graph.ts';
import { certificateAlerts, operatorReconcileErrors, operatorWorkQueueStuck, secretMissing } from './alerts/operator.ts';
import { componentAbsent, rateLimiterMemoryFallback, targetDown } from './alerts/platform.ts';
import { simulationBudgetExhausted } from './alerts/simulation.ts';
import { SLO_ALERTS } from './alerts/slo.ts';
import type { AlertRule } from './alerts/types.ts';

export { RECORDING_RULES } from './alerts/slo.ts';
export type { AlertRule, SeriesInput } from './alerts/types.ts';

export const ALERTS: AlertRule[] = [
  ...SLO_ALERTS,
  targetDown,
  componentAbsent,
  upstreamFailing,
  modelProviderFailing,
  creditRefundSpike,
  rateLimiterMemoryFallback,
  agentPoolBacklog,
  graphWorkerBudgetExhausted,
  operatorReconcileErrors,
  operatorWorkQueueStuck,
  simulationBudgetExhausted,
  billingRefusals,
  billingOutboxStuck,
  ...certificateAlerts(),
  secretMissing,
];
