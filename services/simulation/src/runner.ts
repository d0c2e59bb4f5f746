import { randomUUID } from 'node:crypto';
import { EventEmitter } from 'node:events';
import type { Logger } from '@tempora/kit/observability';
import { ProviderError } from '@tempora/kit/providers';
import { assembleResult, type EngineState, runStep } from './domain/engine.ts';
import { ExposureRefused } from './domain/exposure.ts';
import { type CallRecord, ModelReplyError, type Providers, RunCapReached, RunMeter, RunModels } from './domain/model.ts';
import type { Plan } from './domain/plan.ts';
import type { Mechanism } from './domain/vocabulary.ts';
import { clone } from './domain/world.ts';
import type { SimulationMetrics } from './metrics.ts';
import type { RunRow, RunStatus, SimulationRepository } from './repository.ts';
import { type RunEnding, traceRun, traceStep } from './tracing.ts';

export interface RunnerSettings {
  concurrency: number;
  leaseMs: number;
  claimIntervalMs: number;
  exposureRetries: number;
}

const FOREIGN_KEY_VIOLATION = '23503';

/** Why a run's abort signal fired. */
class Stop extends Error {
  readonly why: 'cancelled' | 'shutdown' | 'lost' | 'deleted';
  constructor(why: 'cancelled' | 'shutdown' | 'lost' | 'deleted') {
    super(why);
    this.why = why;
  }
}

/**
 * Executes runs durably. Runs live in PostgreSQL; a replica claims queued runs (and runs whose lease
 * lapsed because their process died) under a lease it renews, executes them one step at a time, and
 * persists each step's report with the engine's state after it, so a run interrupted by a restart is
 * resumed by whichever replica claims it next, from its last completed step (docs/simulation.md,
 * "Durability"). Cancellation aborts the model call in flight; ending a run settles its budgets.
 */
export class Runner {
  /** `run:<id>` fires after each step and when the run ends (progress streams and waiting requests listen). */
  readonly events = new EventEmitter();
  readonly owner = `runner-${randomUUID()}`;
  private readonly repository: SimulationRepository;
  private readonly providers: Providers;
  private readonly settings: RunnerSettings;
  private readonly metrics: SimulationMetrics;
  private readonly logger: Logger;
  private readonly active = new Map<string, { controller: AbortController; done: Promise<unknown> }>();
  private claimTimer: NodeJS.Timeout | undefined;
  private renewTimer: NodeJS.Timeout | undefined;
  private claiming: Promise<void> | undefined;
  private claimAgain = false;
  private stopped = false;

  constructor(repository: SimulationRepository, providers: Providers, settings: RunnerSettings, metrics: SimulationMetrics, logger: Logger) {
    this.repository = repository;
    this.providers = providers;
    this.settings = settings;
    this.metrics = metrics;
    this.logger = logger;
    this.events.setMaxListeners(0);
  }

  get activeRuns(): number {
    return this.active.size;
  }

  start(): void {
    this.claimTimer = setInterval(() => this.wake(), this.settings.claimIntervalMs);
    // Renewal is also how a cancel made on another replica reaches the run: at most a second late.
    this.renewTimer = setInterval(() => void this.renew(), Math.min(1_000, Math.floor(this.settings.leaseMs / 3)));
    this.claimTimer.unref();
    this.renewTimer.unref();
    this.wake();
  }

  /** Looks for work now (after a run was created here, or a slot freed). */
  wake(): void {
    if (this.stopped) return;
    if (this.claiming) {
      this.claimAgain = true;
      return;
    }
    this.claiming = this.claim()
      .catch((error) => this.logger.warn({ err: error }, 'claiming runs failed'))
      .finally(() => {
        this.claiming = undefined;
        if (this.claimAgain) {
          this.claimAgain = false;
          this.wake();
        }
      });
  }

  private async claim(): Promise<void> {
    const rows = await this.repository.claim(this.owner, this.settings.concurrency - this.active.size, this.settings.leaseMs);
    for (const row of rows) this.execute(row);
  }

  private async renew(): Promise<void> {
    if (!this.active.size) return;
    try {
      const { held } = await this.repository.renew(this.owner, [...this.active.keys()], this.settings.leaseMs);
      for (const [id, run] of this.active) {
        if (!held.has(id)) run.controller.abort(new Stop('lost'));
        else if (held.get(id)) run.controller.abort(new Stop('cancelled'));
      }
    } catch (error) {
      this.logger.warn({ err: error }, 'renewing run leases failed');
    }
  }

  /** Cancels a run: at once when it runs here, else its runner learns it at its next renewal. */
  async cancel(id: string): Promise<RunRow | undefined> {
    const row = await this.repository.requestCancel(id);
    if (!row) return undefined;
    const local = this.active.get(id);
    if (local) local.controller.abort(new Stop('cancelled'));
    else if (row.status === 'queued')
      await this.end(row, null, 'cancelled', {
        state: row.state as EngineState,
        plan: row.plan as Plan,
        partial: { reason: 'cancelled', detail: 'cancelled before it started' },
      });
    return row;
  }

  /**
   * Runs whose rows were deleted with their account: those executing here are aborted at once (their model
   * calls closed; anything they would still write finds no run), and whoever waits on one is woken.
   */
  forget(ids: readonly string[]): void {
    for (const id of ids) {
      this.active.get(id)?.controller.abort(new Stop('deleted'));
      this.events.emit(`run:${id}`, { type: 'end', status: 'deleted' });
    }
  }

  /** Stops claiming, interrupts the runs in flight and hands them back (resumable by any replica at once). */
  async stop(graceMs: number): Promise<void> {
    this.stopped = true;
    clearInterval(this.claimTimer);
    clearInterval(this.renewTimer);
    for (const run of this.active.values()) run.controller.abort(new Stop('shutdown'));
    const done = Promise.all([...this.active.values()].map((run) => run.done));
    await Promise.race([done, new Promise((resolve) => setTimeout(resolve, graceMs).unref())]);
    await this.claiming;
    await this.repository.knex('simulation_runs').where({ lease_owner: this.owner, status: 'running' }).update({ lease_owner: null, lease_until: null });
  }

  private execute(row: RunRow): void {
    const controller = new AbortController();
    const done = traceRun(row, () => this.loop(row, controller))
      .catch((error) => this.logger.error({ err: error, run: row.id }, 'run loop failed'))
      .finally(() => {
        this.active.delete(row.id);
        this.wake();
      });
    this.active.set(row.id, { controller, done });
  }

  private async loop(row: RunRow, controller: AbortController): Promise<RunEnding> {
    // Long on purpose: one run's step loop; its split comes with moving the runner's SQL into the repository (issue 30, item 1).
    const plan = row.plan as Plan;
    let state = row.state as EngineState;
    const started = Date.now();
    if (row.cancel_requested) {
      await this.end(row, this.owner, 'cancelled', { plan, state, partial: { reason: 'cancelled', detail: 'cancelled before its first step' }, started });
      return 'cancelled';
    }
    const meter = new RunMeter(row.cap_micros, row.cost_micros);
    // Call rows are written off the critical path and awaited before the step that made them is saved.
    const writes = new Set<Promise<void>>();
    const written = async () => {
      const pending = [...writes];
      writes.clear();
      await Promise.all(pending);
    };
    const models = new RunModels({
      providers: this.providers,
      meter,
      signal: controller.signal,
      params: plan.llm,
      record: (call: CallRecord) => {
        const write = this.repository.recordCall(row.id, call);
        write.catch(() => undefined);
        writes.add(write);
        this.metrics.calls.inc({ action: call.action, provider: call.provider, model: call.model });
        this.metrics.tokens.inc({ model: call.priced_as, direction: 'input' }, call.input_tokens);
        this.metrics.tokens.inc({ model: call.priced_as, direction: 'output' }, call.output_tokens);
        this.metrics.costUsd.inc({ model: call.priced_as }, call.cost_micros / 1e6);
      },
    });
    const mechanisms = new Set<Mechanism>(plan.mechanisms);
    let seq = row.steps_done;
    // Each step is saved while the next one runs (saves stay in order); a save that fails stops the run.
    let saving: Promise<void> = Promise.resolve();
    try {
      while (seq < plan.steps) {
        if (controller.signal.aborted) throw controller.signal.reason;
        const working = clone(state);
        const before = meter.spentMicros;
        const stepStarted = performance.now();
        models.step = seq;
        const refusalsBefore = working.refusals.length;
        const report = await traceStep(
          { index: seq, mode: plan.mode },
          () =>
            runStep(plan, working, seq, {
              plan,
              models,
              step: seq,
              has: (mechanism) => mechanisms.has(mechanism),
              exposureRetries: this.settings.exposureRetries,
              refusals: working.refusals,
            }),
          () => meter.spentMicros - before,
        );
        this.metrics.exposureRefusals.inc(working.refusals.length - refusalsBefore);
        this.metrics.stepDuration.observe({ mode: plan.mode, kind: report.kind }, (performance.now() - stepStarted) / 1000);
        const done = seq;
        const cost = meter.spentMicros - before;
        const pending = [...writes];
        writes.clear();
        saving = saving.then(async () => {
          await Promise.all(pending);
          if (!(await this.repository.saveStep(row.id, this.owner, done, report, working, cost))) throw new Stop('lost');
          this.events.emit(`run:${row.id}`, { type: 'step', seq: done });
        });
        saving.catch((error) => controller.abort(error instanceof Stop ? error : new SaveFailed(error)));
        state = working;
        seq += 1;
      }
      await saving;
      await this.end(row, this.owner, 'completed', { plan, state, started });
      return 'completed';
    } catch (caught) {
      await models.abandonStep();
      // A call of a run deleted meanwhile (here or on another replica) has no run to be recorded against:
      // that is the deletion holding, not a failure.
      await written().catch(
        (error) =>
          (error as { code?: string }).code === FOREIGN_KEY_VIOLATION || this.logger.error({ err: error, run: row.id }, 'a call could not be recorded'),
      );
      await saving.catch(() => undefined);
      const raised = controller.signal.aborted ? controller.signal.reason : caught;
      const error = raised instanceof SaveFailed ? raised.cause : raised;
      if (error instanceof Stop && error.why === 'deleted') {
        this.logger.info({ run: row.id, step: seq }, 'run stopped: deleted with its account');
        return 'deleted';
      }
      if (error instanceof Stop && error.why !== 'cancelled') {
        // Shutdown or a lost lease: the run is left as it is, to be resumed from its last saved step.
        this.logger.info({ run: row.id, why: error.why, step: seq }, 'run interrupted; it will be resumed');
        return 'interrupted';
      }
      if (error instanceof Stop) {
        await this.end(row, this.owner, 'cancelled', {
          plan,
          state,
          partial: { reason: 'cancelled', detail: `cancelled after ${seq} of ${plan.steps} steps` },
          started,
        });
        return 'cancelled';
      }
      if (error instanceof RunCapReached) {
        await this.end(row, this.owner, 'stopped', {
          plan,
          state,
          partial: {
            reason: 'per_run_max',
            detail: `stopped after ${seq} of ${plan.steps} steps at the run's maximum of $${(row.cap_micros / 1e6).toFixed(6)}: ${error.message}`,
          },
          started,
        });
        return 'stopped';
      }
      const failure = failureOf(error);
      if (failure.status === 500) this.logger.error({ err: error, run: row.id }, 'run failed');
      await this.end(row, this.owner, 'failed', { plan, state, error: failure, started });
      return 'failed';
    }
  }

  /** Ends a run: its result (partial when it did not complete), its budgets settled, its listeners told. */
  private async end(
    row: RunRow,
    owner: string | null,
    status: RunStatus,
    outcome: { plan: Plan; state: EngineState; partial?: RunRow['partial']; error?: RunRow['error']; started?: number },
  ): Promise<void> {
    const calls = await this.repository.calls(row.id);
    const result =
      status === 'failed' && !outcome.state.scenario
        ? null
        : { ...assembleResult(outcome.plan, outcome.state), ...costSection(row, calls), partial: outcome.partial ?? null };
    const ended = await this.repository.finish(row.id, owner, { status, result, partial: outcome.partial ?? null, error: outcome.error ?? null });
    if (!ended) return;
    this.metrics.runsFinished.inc({ mode: row.mode, status });
    if (outcome.started) this.metrics.runDuration.observe({ mode: row.mode, status }, (Date.now() - outcome.started) / 1000);
    this.events.emit(`run:${row.id}`, { type: 'end', status });
  }
}

/** A step could not be saved (its database write failed). */
class SaveFailed extends Error {
  constructor(cause: unknown) {
    super('a step could not be saved', { cause });
  }
}

function failureOf(error: unknown): NonNullable<RunRow['error']> {
  if (error instanceof ExposureRefused) return { status: 422, detail: error.message, violations: error.violations };
  if (error instanceof ProviderError)
    return { status: error.code === 'timeout' ? 504 : 502, detail: `the model provider failed: ${error.message}`, provider: error.provider, code: error.code };
  if (error instanceof ModelReplyError) return { status: 502, detail: error.message };
  return { status: 500, detail: 'the run failed unexpectedly; quote its id when reporting it' };
}

/** The money of a run: estimate, maximum, what its metered calls cost, tokens, and which models answered. */
export function costSection(row: Pick<RunRow, 'estimate_micros' | 'cap_micros'>, calls: CallRecord[]) {
  const byModel = new Map<
    string,
    { provider: string; model: string; priced_as: string; calls: number; input_tokens: number; output_tokens: number; cost_micros: number }
  >();
  let total = 0;
  const tokens = { input: 0, output: 0, thinking: 0, total: 0 };
  for (const call of calls) {
    const key = `${call.provider}|${call.model}|${call.priced_as}`;
    let entry = byModel.get(key);
    if (!entry)
      byModel.set(
        key,
        (entry = { provider: call.provider, model: call.model, priced_as: call.priced_as, calls: 0, input_tokens: 0, output_tokens: 0, cost_micros: 0 }),
      );
    entry.calls += 1;
    entry.input_tokens += call.input_tokens;
    entry.output_tokens += call.output_tokens;
    entry.cost_micros += Number(call.cost_micros);
    total += Number(call.cost_micros);
    tokens.input += call.input_tokens;
    tokens.output += call.output_tokens;
    tokens.thinking += call.thinking_tokens;
  }
  tokens.total = tokens.input + tokens.output;
  return {
    cost: {
      currency: 'USD',
      estimate_usd: row.estimate_micros / 1e6,
      max_usd: row.cap_micros / 1e6,
      actual_usd: total / 1e6,
      calls: calls.length,
      tokens,
      by_model: [...byModel.values()].map(({ cost_micros, ...entry }) => ({ ...entry, cost_usd: cost_micros / 1e6 })),
    },
    models: [...byModel.values()].map((entry) => ({
      provider: entry.provider,
      model: entry.model,
      priced_as: entry.priced_as,
      ...(entry.provider === 'offline'
        ? { offline: true, note: `the deterministic offline provider, standing in for ${entry.priced_as} and metered at its price; no model was called` }
        : { offline: false }),
    })),
  };
}
