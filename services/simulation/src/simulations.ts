import { randomUUID } from 'node:crypto';
import { notFound, unprocessable } from '@tempora/kit/http';
import { canonicalHash } from '@tempora/kit/moments';
import type { Caller } from './auth.ts';
import type { BudgetSource } from './budget-source.ts';
import { covers, periodKey, usdToMicros } from './domain/budgets.ts';
import { initialState, planRun } from './domain/engine.ts';
import type { Plan } from './domain/plan.ts';
import { DEFAULT_MODEL } from './domain/pricing.ts';
import type { TemplateCatalog } from './domain/templates.ts';
import type { Mechanism } from './domain/vocabulary.ts';
import type { SimulationMetrics } from './metrics.ts';
import { BudgetRefused, type Reservation, type RunRow, type RunStatus, type SimulationRepository, type StepRow, TERMINAL } from './repository/index.ts';
import type { Runner } from './runner.ts';
import type { SimulateRequest } from './schemas.ts';
import { activeTraceContext } from './tracing.ts';
import { runView, stepView } from './views.ts';

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

/** A progress stream's events: the run as it stands, each completed step in order, the run as it ended. */
type ProgressEvent = { event: 'run' | 'end'; data: ReturnType<typeof runView> } | { event: 'step'; data: ReturnType<typeof stepView> };

/**
 * Starting, reading, following and cancelling runs: everything the run routes do, without Koa. A run the
 * caller may not see, or one deleted (with its account) while a request follows it, is the kit's 404.
 */
export class Simulations {
  private readonly repository: SimulationRepository;
  private readonly catalog: TemplateCatalog;
  private readonly budgets: BudgetSource;
  private readonly runner: Runner;
  private readonly metrics: SimulationMetrics;
  private readonly defaultModel: string;
  /** How long a progress stream waits before reading a run again that no runner here announces (STREAM_POLL_MS). */
  private readonly pollMs: number;

  constructor(options: {
    repository: SimulationRepository;
    catalog: TemplateCatalog;
    budgets: BudgetSource;
    runner: Runner;
    metrics: SimulationMetrics;
    pollMs: number;
    defaultModel?: string;
  }) {
    this.repository = options.repository;
    this.catalog = options.catalog;
    this.budgets = options.budgets;
    this.runner = options.runner;
    this.metrics = options.metrics;
    this.pollMs = options.pollMs;
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
      const creation = await this.repository.runs.create(
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
      this.metrics.runsStarted.inc({ mode: plan.mode });
      this.runner.wake();
      return { run: creation.run, replayed: false };
    } catch (error) {
      if (error instanceof BudgetRefused) this.metrics.budgetRefusals.inc({ budget: error.budget });
      throw error;
    }
  }

  /** A run is visible to its owner and to services acting as themselves; to anyone else it does not exist. */
  async visible(id: string, caller: Caller): Promise<RunRow> {
    const row = await this.repository.runs.get(id);
    if (!row || (row.owner !== caller.owner && !caller.service)) throw notFound(`no simulation ${id}`);
    return row;
  }

  /** A run read again while a request follows it: 404 once it is gone (deleted with its account meanwhile). */
  async current(id: string): Promise<RunRow> {
    const row = await this.repository.runs.get(id);
    if (!row) throw notFound(`simulation ${id} no longer exists (deleted with its account)`);
    return row;
  }

  /** The owner's runs, newest first. */
  list(owner: string, page: { limit: number; offset: number; status?: RunStatus }): Promise<{ items: RunRow[]; total: number }> {
    return this.repository.runs.list(owner, page);
  }

  /** The run's completed steps, in order. */
  steps(id: string): Promise<StepRow[]> {
    return this.repository.runs.steps(id);
  }

  /** Asks a run to cancel (runner.ts, `cancel`); undefined when it has already ended. */
  cancel(id: string): Promise<RunRow | undefined> {
    return this.runner.cancel(id);
  }

  /** The run once it has ended or `ms` have passed, whichever is first (read again at once when `ms` is 0). */
  async waitFor(id: string, ms: number): Promise<RunRow> {
    if (ms > 0) {
      const watch = this.runner.watch(id, { only: 'end' });
      try {
        const row = await this.repository.runs.get(id);
        if (row && !TERMINAL.includes(row.status)) await watch.next(ms);
      } finally {
        watch.close();
      }
    }
    return this.current(id);
  }

  /**
   * Refuses a `Last-Event-ID` the run's stream cannot have given: one beyond its events so far (`run`, a
   * step each, and `end` once it ended), read after the client read that id.
   */
  checkResume(first: RunRow, after: number): void {
    const sent = first.steps_done + (TERMINAL.includes(first.status) ? 2 : 1);
    if (after > sent)
      throw unprocessable(`Last-Event-ID ${after} is not an event of run ${first.id}'s stream, which has sent ${sent} so far`, [
        { path: 'headers.last-event-id', message: `at most ${sent}` },
      ]);
  }

  /**
   * A run's progress, from `first` (the run as the request found it): `run`, one `step` per completed step
   * in order (those completed before the stream opened first), then `end`; event n of that sequence, on
   * every connection, is `run` for 1, the step of seq n - 2, and `end` after the last step, so a stream
   * resumed after event `after` starts with event `after + 1`. Stops when `signal` aborts (the client
   * left); throws what reading the run throws (a 404 once it was deleted, an outage).
   */
  async *follow(first: RunRow, signal: AbortSignal, after = 0): AsyncGenerator<ProgressEvent> {
    if (after === 0) yield { event: 'run', data: runView(first) };
    const watch = this.runner.watch(first.id, { signal });
    // Steps are numbered from 0 without gaps (a step's seq is the count before it), so event `after` is step `after - 2`.
    let last = Math.max(after - 2, -1);
    try {
      while (!signal.aborted) {
        watch.reset();
        for (const step of await this.repository.runs.steps(first.id, last)) {
          yield { event: 'step', data: stepView(step) };
          last = step.seq;
        }
        const row = await this.current(first.id);
        if (TERMINAL.includes(row.status)) {
          // Steps saved between the read above and the end come before `end`.
          for (const step of await this.repository.runs.steps(first.id, last)) yield { event: 'step', data: stepView(step) };
          if (after < row.steps_done + 2) yield { event: 'end', data: runView(row) };
          return;
        }
        // Woken by this process's runner at once; a run on another replica is read again after pollMs.
        await watch.next(this.pollMs);
      }
    } finally {
      watch.close();
    }
  }
}
