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
import type { RunRow, RunStatus, SimulationRepository } from './repository/index.ts';
import { costSection } from './run-cost.ts';
import { type RunEvent, RunWatch } from './run-watch.ts';
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

/** Call rows are written off the critical path and awaited before the step that made them is saved. */
class CallWrites {
  private readonly writes = new Set<Promise<void>>();

  add(write: Promise<void>): void {
    write.catch(() => undefined);
    this.writes.add(write);
  }

  /** The writes so far, handed to whatever waits for them (the save of the step that made them). */
  take(): Promise<void>[] {
    const pending = [...this.writes];
    this.writes.clear();
    return pending;
  }
}

/** A run executing here: what it runs with, and where it stands (its last completed step's state, its saves). */
interface InFlight {
  row: RunRow;
  plan: Plan;
  controller: AbortController;
  meter: RunMeter;
  models: RunModels;
  writes: CallWrites;
  mechanisms: Set<Mechanism>;
  started: number;
  state: EngineState;
  /** The step it runs next. */
  seq: number;
  /** Each step is saved while the next one runs (saves stay in order); a save that fails stops the run. */
  saving: Promise<void>;
}

/**
 * Executes runs durably. Runs live in PostgreSQL; a replica claims queued runs (and runs whose lease
 * lapsed because their process died) under a lease it renews, executes them one step at a time, and
 * persists each step's report with the engine's state after it, so a run interrupted by a restart is
 * resumed by whichever replica claims it next, from its last completed step (docs/simulation.md,
 * "Durability"). Cancellation aborts the model call in flight; ending a run settles its budgets.
 */
export class Runner {
  /** `run:<id>` fires after each step and when the run ends (progress streams and waiting requests watch it). */
  private readonly events = new EventEmitter();
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
    const rows = await this.repository.execution.claim(this.owner, this.settings.concurrency - this.active.size, this.settings.leaseMs);
    for (const row of rows) this.execute(row);
  }

  private async renew(): Promise<void> {
    if (!this.active.size) return;
    try {
      const { held } = await this.repository.execution.renew(this.owner, [...this.active.keys()], this.settings.leaseMs);
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
    const row = await this.repository.runs.requestCancel(id);
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

  /** Watches a run's events here from now on (run-watch.ts): `only` one type of them, until `signal` aborts. */
  watch(runId: string, options: { only?: RunEvent['type']; signal?: AbortSignal } = {}): RunWatch {
    return new RunWatch(this.events, runId, options);
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
    await this.repository.execution.release(this.owner);
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
    const plan = row.plan as Plan;
    const started = Date.now();
    if (row.cancel_requested) {
      const partial = { reason: 'cancelled', detail: 'cancelled before its first step' };
      await this.end(row, this.owner, 'cancelled', { plan, state: row.state as EngineState, partial, started });
      return 'cancelled';
    }
    const run = this.prepare(row, plan, controller, started);
    try {
      while (run.seq < plan.steps) {
        if (controller.signal.aborted) throw controller.signal.reason;
        await this.step(run);
      }
      await run.saving;
      await this.end(row, this.owner, 'completed', { plan, state: run.state, started });
      return 'completed';
    } catch (caught) {
      await this.settleInFlight(run);
      const raised = controller.signal.aborted ? controller.signal.reason : caught;
      return this.interrupted(run, raised instanceof SaveFailed ? raised.cause : raised);
    }
  }

  /** A run about to execute its steps: its models, metered against its maximum, each call recorded and counted. */
  private prepare(row: RunRow, plan: Plan, controller: AbortController, started: number): InFlight {
    const meter = new RunMeter(row.cap_micros, row.cost_micros);
    const writes = new CallWrites();
    const models = new RunModels({
      providers: this.providers,
      meter,
      signal: controller.signal,
      params: plan.llm,
      record: (call: CallRecord) => {
        writes.add(this.repository.execution.recordCall(row.id, call));
        this.metrics.calls.inc({ action: call.action, provider: call.provider, model: call.model });
        this.metrics.tokens.inc({ model: call.priced_as, direction: 'input' }, call.input_tokens);
        this.metrics.tokens.inc({ model: call.priced_as, direction: 'output' }, call.output_tokens);
        this.metrics.costUsd.inc({ model: call.priced_as }, call.cost_micros / 1e6);
      },
    });
    const mechanisms = new Set<Mechanism>(plan.mechanisms);
    return {
      row,
      plan,
      controller,
      meter,
      models,
      writes,
      mechanisms,
      started,
      state: row.state as EngineState,
      seq: row.steps_done,
      saving: Promise.resolve(),
    };
  }

  /** Runs the next step on a copy of the state, and queues its save behind the previous step's. */
  private async step(run: InFlight): Promise<void> {
    const { plan, meter, models, seq } = run;
    const working = clone(run.state);
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
          has: (mechanism) => run.mechanisms.has(mechanism),
          exposureRetries: this.settings.exposureRetries,
          refusals: working.refusals,
        }),
      () => meter.spentMicros - before,
    );
    this.metrics.exposureRefusals.inc(working.refusals.length - refusalsBefore);
    this.metrics.stepDuration.observe({ mode: plan.mode, kind: report.kind }, (performance.now() - stepStarted) / 1000);
    const cost = meter.spentMicros - before;
    const pending = run.writes.take();
    run.saving = run.saving.then(async () => {
      await Promise.all(pending);
      if (!(await this.repository.execution.saveStep(run.row.id, this.owner, seq, report, working, cost))) throw new Stop('lost');
      this.events.emit(`run:${run.row.id}`, { type: 'step', seq });
    });
    run.saving.catch((error) => run.controller.abort(error instanceof Stop ? error : new SaveFailed(error)));
    run.state = working;
    run.seq = seq + 1;
  }

  /** What a run that stopped early still has in flight: the step's model calls closed, its call rows and saves waited for. */
  private async settleInFlight(run: InFlight): Promise<void> {
    await run.models.abandonStep();
    // A call of a run deleted meanwhile (here or on another replica) has no run to be recorded against:
    // that is the deletion holding, not a failure.
    await Promise.all(run.writes.take()).catch(
      (error) =>
        (error as { code?: string }).code === FOREIGN_KEY_VIOLATION || this.logger.error({ err: error, run: run.row.id }, 'a call could not be recorded'),
    );
    await run.saving.catch(() => undefined);
  }

  /** Ends (or leaves to be resumed) a run its steps did not complete, by what stopped it. */
  private async interrupted(run: InFlight, error: unknown): Promise<RunEnding> {
    const { row, plan, state, seq, started } = run;
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
      const partial = { reason: 'cancelled', detail: `cancelled after ${seq} of ${plan.steps} steps` };
      await this.end(row, this.owner, 'cancelled', { plan, state, partial, started });
      return 'cancelled';
    }
    if (error instanceof RunCapReached) {
      const detail = `stopped after ${seq} of ${plan.steps} steps at the run's maximum of $${(row.cap_micros / 1e6).toFixed(6)}: ${error.message}`;
      await this.end(row, this.owner, 'stopped', { plan, state, partial: { reason: 'per_run_max', detail }, started });
      return 'stopped';
    }
    const failure = failureOf(error);
    if (failure.status === 500) this.logger.error({ err: error, run: row.id }, 'run failed');
    await this.end(row, this.owner, 'failed', { plan, state, error: failure, started });
    return 'failed';
  }

  /** Ends a run: its result (partial when it did not complete), its budgets settled, its listeners told. */
  private async end(
    row: RunRow,
    owner: string | null,
    status: RunStatus,
    outcome: { plan: Plan; state: EngineState; partial?: RunRow['partial']; error?: RunRow['error']; started?: number },
  ): Promise<void> {
    const calls = await this.repository.runs.calls(row.id);
    const result =
      status === 'failed' && !outcome.state.scenario
        ? null
        : { ...assembleResult(outcome.plan, outcome.state), ...costSection(row, calls), partial: outcome.partial ?? null };
    const ended = await this.repository.execution.finish(row.id, owner, { status, result, partial: outcome.partial ?? null, error: outcome.error ?? null });
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
