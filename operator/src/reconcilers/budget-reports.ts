// What the simulation service reports of a SimulationBudget: `GET /api/v1/simulations/budgets/{name}` on
// the TemporaGateway's simulation Service (docs/simulation.md), asked as a service acting as itself, with the
// SERVICE_KEY of the TemporaGateway's keys Secret. The service keeps the ledger; the operator only reads it.
import { z } from 'zod';
import type { TemporaGateway } from '../api/v1alpha1/index.ts';
import { serviceUrl } from '../config.ts';
import type { KubeClient } from '../kube/client.ts';
import * as R from '../kube/resources.ts';
import { servicePort } from './platform-services.ts';

/**
 * The service's answer (its BudgetViewSchema, services/simulation/src/schemas.ts), restated: the operator's
 * image carries the kit, not the simulation service. operator.test.ts reads the real service with it, so
 * the two cannot drift apart unnoticed.
 */
const BudgetReportSchema = z.object({
  name: z.string(),
  scope: z.string(),
  period: z.enum(['daily', 'monthly']),
  current_period: z.string(),
  limit_usd: z.number(),
  per_run_max_usd: z.number().nullable(),
  spent_usd: z.number(),
  reserved_usd: z.number(),
  remaining_usd: z.number(),
  alert_thresholds: z.array(z.number()),
  alerts_crossed: z.array(z.number()),
  exhausted: z.boolean(),
});
export type BudgetReport = z.output<typeof BudgetReportSchema>;

/**
 * Why there is no report. ServiceKeyRequired and ServiceKeyRefused need someone to act (the keys Secret);
 * NotLoaded and SimulationUnavailable pass by themselves (the ConfigMap reaching the pods, the pods
 * starting).
 */
export type ReportProblem = { reason: 'ServiceKeyRequired' | 'ServiceKeyRefused' | 'NotLoaded' | 'SimulationUnavailable'; message: string };

export type BudgetReading = { report: BudgetReport } | { problem: ReportProblem };

export interface BudgetReader {
  read(gw: TemporaGateway, budget: string): Promise<BudgetReading>;
}

/** How long a service key read from its Secret is reused; a key the service refuses is read again at once. */
const KEY_TTL_MS = 60_000;
const TIMEOUT_MS = 5_000;

export function simulationServiceName(gw: TemporaGateway): string {
  return `${gw.metadata.name}-simulation`;
}

export class BudgetReports implements BudgetReader {
  readonly #client: KubeClient;
  readonly #urlTemplate: string;
  /** SERVICE_KEY by `<namespace>/<Secret>`: one Secret read per minute, not one per budget and poll. */
  readonly #keys = new Map<string, { key: string; readAt: number }>();

  constructor(client: KubeClient, urlTemplate: string) {
    this.#client = client;
    this.#urlTemplate = urlTemplate;
  }

  async read(gw: TemporaGateway, budget: string): Promise<BudgetReading> {
    const namespace = gw.metadata.namespace ?? 'default';
    const svc = simulationServiceName(gw);
    const secret = gw.spec.secrets?.keys;
    if (!secret) {
      return problem(
        'ServiceKeyRequired',
        `${svc} tells its budgets' spend to services only: TemporaGateway ${gw.metadata.name} names no keys Secret (spec.secrets.keys) with a SERVICE_KEY`,
      );
    }
    const key = await this.#serviceKey(namespace, secret);
    if (!key) return problem('ServiceKeyRequired', `Secret ${secret} (the TemporaGateway's spec.secrets.keys) does not exist or has no SERVICE_KEY`);
    const url = `${serviceUrl(this.#urlTemplate, svc, namespace, servicePort('simulation'))}/api/v1/simulations/budgets/${encodeURIComponent(budget)}`;
    let reply: Response;
    try {
      reply = await fetch(url, { headers: { accept: 'application/json', 'x-service-key': key }, signal: AbortSignal.timeout(TIMEOUT_MS) });
    } catch (err) {
      const code = errorCode(err);
      return problem('SimulationUnavailable', `${svc} cannot be reached (${code})`);
    }
    const body = await reply.text().catch(() => '');
    if (reply.status === 401 || reply.status === 403) {
      this.#keys.delete(`${namespace}/${secret}`);
      return problem('ServiceKeyRefused', `${svc} refuses the SERVICE_KEY of Secret ${secret} (${reply.status})`);
    }
    if (reply.status === 404) {
      return problem(
        'NotLoaded',
        `${svc} has not read this budget yet: the ConfigMap ${gw.metadata.name}-simulation-budgets reaches its pods within about a minute`,
      );
    }
    if (!reply.ok) return problem('SimulationUnavailable', `${svc} answers ${reply.status}`);
    let parsed: ReturnType<typeof BudgetReportSchema.safeParse>;
    try {
      parsed = BudgetReportSchema.safeParse(JSON.parse(body));
    } catch {
      return problem('SimulationUnavailable', `${svc} answers something other than JSON`);
    }
    return parsed.success
      ? { report: parsed.data }
      : problem('SimulationUnavailable', `${svc} answers a budget without ${parsed.error.issues.map((i) => i.path.join('.')).join(', ')}`);
  }

  async #serviceKey(namespace: string, secret: string): Promise<string | undefined> {
    const cacheKey = `${namespace}/${secret}`;
    const cached = this.#keys.get(cacheKey);
    if (cached && Date.now() - cached.readAt < KEY_TTL_MS) return cached.key;
    const found = await this.#client.getOrUndefined(R.Secret, namespace, secret);
    const encoded = found?.data?.SERVICE_KEY;
    // SERVICE_KEY may list several keys (comma-separated); every service accepts each of them.
    const key = encoded
      ? Buffer.from(encoded, 'base64')
          .toString('utf8')
          .split(',')
          .map((k) => k.trim())
          .find(Boolean)
      : undefined;
    // Only a key found is kept: a Secret created or fixed is then seen at the next poll.
    if (key) this.#keys.set(cacheKey, { key, readAt: Date.now() });
    return key;
  }
}

/** What fetch says went wrong: the system error under its TypeError (ECONNREFUSED, ENOTFOUND), else its name (TimeoutError). */
function errorCode(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  const cause: unknown = err.cause;
  return cause instanceof Error && 'code' in cause && typeof cause.code === 'string' ? cause.code : err.name;
}

function problem(reason: ReportProblem['reason'], message: string): { problem: ReportProblem } {
  return { problem: { reason, message } };
}
