import { randomUUID } from 'node:crypto';
import { canonicalHash } from '@tempora/kit/moments';
import type { Caller } from './auth.ts';
import type { BudgetSource } from './budget-source.ts';
import { type Budget, covers, microsToUsd, periodKey, usdToMicros } from './domain/budgets.ts';
import { initialState, planRun } from './domain/engine.ts';
import type { Plan } from './domain/plan.ts';
import { DEFAULT_MODEL } from './domain/pricing.ts';
import type { TemplateCatalog } from './domain/templates.ts';
import type { Mechanism } from './domain/vocabulary.ts';
import type { BudgetFigures, SimulationMetrics } from './metrics.ts';
import { BudgetRefused, type Reservation, type RunRow, type SimulationRepository, TERMINAL } from './repository.ts';
import type { Runner } from './runner.ts';
import type { SimulateRequest } from './schemas.ts';
import { activeTraceContext } from './tracing.ts';

/** The spec's ceiling on one run: $1.00 (platform-interface.md, "Limits"). */
export const RUN_CEILING_MICROS = 1_000_000;
const PROMPT_MECHANISMS: Mechanism[] = ['M3', 'M7', 'M11', 'M13'];

export class UnknownTemplate extends Error {
  override name = 'UnknownTemplate';
}

/** An Idempotency-Key its owner already used with a different request. */
export class IdempotencyKeyReused extends Error {
  override name = 'IdempotencyKeyReused';
}

/** A run started, or the run an Idempotency-Key had already started (`replayed`). */
export interface Started {
  run: RunRow;
  replayed: boolean;
}

export interface BudgetStatus {
  name: string;
  scope: string;
  period: Budget['period'];
  current_period: string;
  limit_usd: number;
  per_run_max_usd: number | null;
  spent_usd: number;
  reserved_usd: number;
  remaining_usd: number;
  runs: number;
  alert_thresholds: number[];
  alerts_crossed: number[];
  exhausted: boolean;
}

/**
 * Starting, reading and cancelling runs, and the budgets' standing: everything the routes do, without Koa.
 */
export class Simulations {
  private readonly repository: SimulationRepository;
  private readonly catalog: TemplateCatalog;
  private readonly budgets: BudgetSource;
  private readonly runner: Runner;
  private readonly metrics: () => SimulationMetrics;
  private readonly defaultModel: string;

  constructor(options: {
    repository: SimulationRepository;
    catalog: TemplateCatalog;
    budgets: BudgetSource;
    runner: Runner;
    metrics: () => SimulationMetrics;
    defaultModel?: string;
  }) {
    this.repository = options.repository;
    this.catalog = options.catalog;
    this.budgets = options.budgets;
    this.runner = options.runner;
    this.metrics = options.metrics;
    this.defaultModel = options.defaultModel ?? DEFAULT_MODEL;
  }

  /** The run's plan and estimate, without starting it. */
  plan(request: SimulateRequest, seed: string): Plan {
    const template = request.template ? this.catalog.get(request.template) : null;
    if (request.template && !template)
      throw new UnknownTemplate(`no template ${request.template}; GET /api/v1/simulate/templates lists the ${this.catalog.templates.size}`);
    const { max_tokens, ...llm } = request.llm_params ?? {};
    return planRun(request.seed ?? seed, template ?? null, {
      mode: request.mode ?? template?.mode ?? 'FORWARD',
      fidelity: request.fidelity,
      mechanisms: [...(request.mechanisms ?? template?.mechanisms ?? PROMPT_MECHANISMS)].sort((a, b) => Number(a.slice(1)) - Number(b.slice(1))) as Mechanism[],
      prompt: request.prompt ?? null,
      llm: { ...llm, ...(max_tokens !== undefined ? { max_tokens } : {}) },
      baseModel: request.text_model ?? this.defaultModel,
    });
  }

  /**
   * Starts a run: its estimate is reserved against every budget that covers it (refused with the budget
   * that has no room), its maximum is the least of the spec's $1.00, the caller's max_cost_usd and every
   * such budget's perRunMaxUsd, and it is queued durably for a runner to claim.
   *
   * With an `idempotencyKey` (the caller's own: keys are per owner), the key is stored with the run in
   * the same transaction; a request that comes with a key already stored starts nothing and answers that
   * key's run, if the request is the same (else IdempotencyKeyReused).
   */
  async start(request: SimulateRequest, caller: Caller, idempotencyKey?: string): Promise<Started> {
    const id = randomUUID();
    const plan = this.plan(request, id);
    const now = new Date();
    const applying = this.budgets.all.filter((budget) => covers(budget, { owner: caller.owner, template: plan.template, mode: plan.mode }));
    const cap = Math.min(
      RUN_CEILING_MICROS,
      plan.allowanceMicros,
      request.max_cost_usd !== undefined ? usdToMicros(request.max_cost_usd) : Number.POSITIVE_INFINITY,
      ...applying.map((budget) => (budget.perRunMaxUsd != null ? usdToMicros(budget.perRunMaxUsd) : Number.POSITIVE_INFINITY)),
    );
    const reservations: Reservation[] = applying.map((budget) => ({
      budget: budget.name,
      period: periodKey(budget.period, now),
      limitMicros: usdToMicros(budget.limitUsd),
      amountMicros: cap,
    }));
    // Two requests are the same for a key when their validated forms are (RFC 8785): field order, spacing,
    // folded letter case and defaults written out or left implicit do not count.
    const idempotency = idempotencyKey === undefined ? undefined : { owner: caller.owner, key: idempotencyKey, fingerprint: canonicalHash(request) };
    try {
      const creation = await this.repository.createRun(
        {
          id,
          owner: caller.owner,
          caller: caller.principal,
          mode: plan.mode,
          fidelity: plan.fidelity,
          template: plan.template,
          prompt: plan.prompt,
          mechanisms: plan.mechanisms,
          plan,
          state: initialState(plan),
          steps_total: plan.steps,
          estimate_micros: plan.allowanceMicros,
          cap_micros: cap,
          trace: activeTraceContext(),
        },
        reservations,
        idempotency,
      );
      if (!creation.created) {
        if (creation.fingerprint !== idempotency?.fingerprint)
          throw new IdempotencyKeyReused(
            `the Idempotency-Key was used with a different request (it started simulation ${creation.run.id}); use a new key for a new request`,
          );
        return { run: creation.run, replayed: true };
      }
      this.metrics().runsStarted.inc({ mode: plan.mode });
      this.runner.wake();
      return { run: creation.run, replayed: false };
    } catch (error) {
      if (error instanceof BudgetRefused) this.metrics().budgetRefusals.inc({ budget: error.budget });
      throw error;
    }
  }

  /** Resolves when the run has ended or `ms` have passed, whichever is first. */
  async waitFor(id: string, ms: number): Promise<void> {
    const ended = (row: RunRow | undefined) => !row || TERMINAL.includes(row.status);
    if (ended(await this.repository.run(id))) return;
    await new Promise<void>((resolve) => {
      const listener = (event: { type: string }) => {
        if (event.type === 'end') finish();
      };
      const timer = setTimeout(() => finish(), ms);
      const finish = () => {
        clearTimeout(timer);
        this.runner.events.off(`run:${id}`, listener);
        resolve();
      };
      this.runner.events.on(`run:${id}`, listener);
    });
  }

  async budgetStatus(budget: Budget, period = periodKey(budget.period, new Date())): Promise<BudgetStatus> {
    const ledger = await this.repository.ledger(budget.name, period);
    const limit = usdToMicros(budget.limitUsd);
    const spentFraction = limit > 0 ? ledger.spent_micros / limit : ledger.spent_micros > 0 ? 1 : 0;
    return {
      name: budget.name,
      scope: budget.scope,
      period: budget.period,
      current_period: period,
      limit_usd: budget.limitUsd,
      per_run_max_usd: budget.perRunMaxUsd ?? null,
      spent_usd: microsToUsd(ledger.spent_micros),
      reserved_usd: microsToUsd(ledger.reserved_micros),
      remaining_usd: microsToUsd(Math.max(0, limit - ledger.spent_micros - ledger.reserved_micros)),
      runs: ledger.runs,
      alert_thresholds: budget.alertThresholds,
      alerts_crossed: budget.alertThresholds.filter((threshold) => spentFraction >= threshold),
      exhausted: ledger.spent_micros >= limit,
    };
  }

  async budgetFigures(): Promise<BudgetFigures[]> {
    return Promise.all(
      this.budgets.all.map(async (budget) => {
        const status = await this.budgetStatus(budget);
        return {
          budget: status.name,
          period: status.current_period,
          limitUsd: status.limit_usd,
          spentUsd: status.spent_usd,
          reservedUsd: status.reserved_usd,
          remainingUsd: status.remaining_usd,
        };
      }),
    );
  }
}
