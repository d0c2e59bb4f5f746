import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { idempotencyKeyReused, Problem, unprocessable } from '@tempora/kit/http';
import { canonicalHash } from '@tempora/kit/moments';
import type { Logger } from '@tempora/kit/observability';
import type { GraphMoment } from './agents/types.ts';
import { CallbackPolicy, deliverCallback } from './callbacks.ts';
import type { GenerationConfig } from './config.ts';
import { lookupMoment } from './graph-client.ts';
import type { GenerationMetrics } from './metrics.ts';
import { operatorDefaults, type Selection, type SelectionDefaults, selectModels } from './models.ts';
import { runPipeline } from './pipeline/pipeline.ts';
import { JudgeRejected, type RunOptions, StepFailed } from './pipeline/run.ts';
import type { AgentRunner } from './pipeline/runner.ts';
import { problemOf } from './problems.ts';
import type { ProviderSet } from './providers.ts';
import type { GenerationRepository, JobLease, JobRow, OwnerErasure } from './repository/index.ts';
import { buildScene, type SceneRecord } from './scene.ts';
import type { GenerateRequest } from './schemas.ts';

export interface GeneratorDeps {
  config: GenerationConfig;
  repository: GenerationRepository;
  runner: AgentRunner;
  providers: ProviderSet;
  metrics: GenerationMetrics;
  logger: Logger;
}

/** Why an owner's generation stopped, or stored nothing, when their account was deleted meanwhile. */
const accountDeleted = () => new StepFailed(null, 'cancelled', "the owner's account was deleted; nothing was stored");

/** A stopping replica's answer to new work: another replica takes it at once. */
const draining = () =>
  new Problem(503, 'this replica is shutting down and takes no new generation; send the request again', {
    title: 'Draining',
    type: 'https://tempora.dev/problems/draining',
    headers: { 'Retry-After': '1' },
  });

/** A job's pipeline runs at most twice: once, and once more when the replica running it was lost. */
const MAX_RUNS = 2;
const INTERRUPTED = {
  status: 503,
  detail: 'the generation service lost this job twice (its replica stopped without finishing it); submit it again',
  agent: null,
};
/** Jobs taken over per statement; a sweep goes on while there are more. */
const SWEEP_BATCH = 20;

type JobOutcome = { status: 'completed'; scene: SceneRecord | null; timepoint_id: string | null } | { status: 'failed'; error: NonNullable<JobRow['error']> };

export class Generator {
  private readonly deps: GeneratorDeps;
  readonly callbackPolicy: CallbackPolicy;
  /** This process, as job leases name it. */
  readonly instance = `${hostname()}-${randomUUID().slice(0, 8)}`;
  private readonly jobs = new Set<Promise<void>>();
  /** The jobs this process holds (running, or delivering their callback), with what stops their work. */
  private readonly held = new Map<string, { lease: JobLease; controller: AbortController }>();
  private leaseTimer: NodeJS.Timeout | undefined;
  private leaseRound: Promise<unknown> = Promise.resolve();
  /** Set once the process is asked to stop: no new work from then, and the jobs' time runs out then. */
  private drainDeadline: number | undefined;
  private closed = false;
  /** The generations running in this process for each owner, so that deleting the account stops them. */
  private readonly running = new Map<string, Set<AbortController>>();
  readonly defaults: SelectionDefaults;

  constructor(deps: GeneratorDeps) {
    this.deps = deps;
    this.callbackPolicy = new CallbackPolicy(deps.config.CALLBACK_ALLOWLIST);
    const operator = operatorDefaults(deps.config.MODEL_PRESETS, deps.config.MODEL_POLICY);
    if (operator.ignored.length)
      deps.logger.warn(
        { ignored: operator.ignored },
        'MODEL_PRESETS / MODEL_POLICY name presets this service does not have (hyper, balanced, hd, gemini3) or unknown providers; ignored',
      );
    this.defaults = {
      defaultTextModel: deps.config.DEFAULT_TEXT_MODEL,
      defaultImageModel: deps.config.DEFAULT_IMAGE_MODEL,
      permissiveTextModel: deps.config.PERMISSIVE_TEXT_MODEL,
      ...operator.defaults,
    };
  }

  /** Model selection and request-level checks; throws 422 naming the field. */
  prepare(request: GenerateRequest, owner: string | null): Selection {
    const { selection, errors } = selectModels(request, this.deps.providers, this.defaults);
    if (request.visibility === 'private' && !owner) errors.push({ path: 'body.visibility', message: 'a private scene needs an owner: send X-User-ID' });
    if (errors.length > 0 || !selection) throw unprocessable(`the request is invalid: ${errors.map((e) => `${e.path}: ${e.message}`).join('; ')}`, errors);
    return selection;
  }

  private imageUrl(id: string): string {
    const base = (this.deps.config.PUBLIC_URL ?? this.deps.config.GENERATION_URL).replace(/\/$/, '');
    return `${base}/api/v1/timepoints/${id}/image`;
  }

  async lookup(query: string, signal?: AbortSignal): Promise<GraphMoment | null> {
    if (!this.deps.config.GRAPH_LOOKUP) return null;
    return lookupMoment(this.deps.config.GRAPH_URL, query, this.deps.config.GRAPH_LOOKUP_TIMEOUT_MS, this.deps.logger, signal);
  }

  /**
   * Runs the pipeline and stores the scene. An owner's generation is registered while it runs, so that
   * eraseOwner can stop it.
   */
  async generate(
    request: GenerateRequest,
    selection: Selection,
    owner: string | null,
    mode: 'sync' | 'stream' | 'async',
    options: RunOptions = {},
    job?: JobLease,
  ): Promise<SceneRecord> {
    if (owner === null) return this.run(request, selection, null, mode, options, job);
    const controller = new AbortController();
    const outer = options.signal;
    const forward = () => controller.abort(outer?.reason);
    if (outer?.aborted) forward();
    outer?.addEventListener('abort', forward, { once: true });
    const mine = this.running.get(owner) ?? new Set();
    this.running.set(owner, mine.add(controller));
    try {
      return await this.run(request, selection, owner, mode, { ...options, signal: controller.signal }, job);
    } finally {
      outer?.removeEventListener('abort', forward);
      mine.delete(controller);
      if (mine.size === 0 && this.running.get(owner) === mine) this.running.delete(owner);
    }
  }

  private async run(
    request: GenerateRequest,
    selection: Selection,
    owner: string | null,
    mode: 'sync' | 'stream' | 'async',
    options: RunOptions,
    job: JobLease | undefined,
  ): Promise<SceneRecord> {
    const started = performance.now();
    const observe = (outcome: string) => {
      this.deps.metrics.requests.inc({ mode, outcome });
      this.deps.metrics.pipelineDuration.observe({ mode, preset: selection.preset, outcome }, (performance.now() - started) / 1000);
    };
    try {
      const graphMoment = await this.lookup(request.query, options.signal);
      const result = await runPipeline(
        {
          runner: this.deps.runner,
          metrics: this.deps.metrics,
          repairAttempts: this.deps.config.AGENT_REPAIR_ATTEMPTS,
          timeoutMs: this.deps.config.GENERATION_TIMEOUT_MS,
        },
        request,
        selection,
        graphMoment,
        options,
      );
      if (options.signal?.aborted)
        throw options.signal.reason instanceof StepFailed ? options.signal.reason : new StepFailed(null, 'cancelled', 'the client went away');
      const id = randomUUID();
      const image = request.generate_image && result.image ? result.image : null;
      const imageUrl = image ? (image.data ? this.imageUrl(id) : (image.url ?? null)) : null;
      const record = buildScene({ id, request, selection, result, graphMoment, owner, imageUrl, now: new Date() });
      const stored = await this.deps.repository.timepoints.insert(
        record,
        image?.data ? { data: Buffer.from(image.data, 'base64'), mime_type: image.mime_type } : null,
        job,
      );
      if (!stored) throw accountDeleted();
      observe('completed');
      return record;
    } catch (error) {
      observe(error instanceof JudgeRejected ? 'rejected' : error instanceof StepFailed && error.code === 'cancelled' ? 'cancelled' : 'failed');
      throw error;
    }
  }

  /**
   * Account deletion: stops the owner's generations running in this process and deletes everything stored
   * for the owner. A generation of theirs running on another replica finishes but cannot store its scene:
   * the erasure is held for as long as a generation may run (GENERATION_TIMEOUT_MS) and a minute more.
   * The local ones are stopped once their jobs are gone, so none of them records its failure or calls back.
   */
  async eraseOwner(owner: string): Promise<OwnerErasure> {
    const erased = await this.deps.repository.erasures.erase(owner, this.deps.config.GENERATION_TIMEOUT_MS + 60_000);
    for (const controller of this.running.get(owner) ?? []) controller.abort(accountDeleted());
    return erased;
  }

  /** Refuses new generations once the process is stopping (503 with Retry-After: another replica takes them). */
  admit(): void {
    if (this.drainDeadline !== undefined) throw draining();
  }

  /**
   * Async generation: the job row now, leased to this process, the pipeline and the callback in the
   * background. With an `idempotencyKey` (its owner's own), the key is stored with the job; a request that
   * comes with a key already stored submits nothing and is given that key's job (`replayed`), if the
   * request is the same (else 422).
   */
  async submit(request: GenerateRequest, owner: string | null, idempotencyKey?: string): Promise<{ job: JobRow; replayed: boolean }> {
    if (request.callback_url) {
      if (!this.deps.config.CALLBACK_SECRET)
        throw unprocessable('callbacks are not enabled on this server', [
          { path: 'body.callback_url', message: 'this server has no CALLBACK_SECRET to sign callbacks with' },
        ]);
      const refused = await this.callbackPolicy.check(request.callback_url);
      if (refused) throw unprocessable(`callback_url refused: ${refused}`, [{ path: 'body.callback_url', message: refused }]);
    }
    // Two requests are the same for a key when their validated forms are (RFC 8785), whatever their field order or spacing.
    const idempotency = idempotencyKey === undefined ? undefined : { owner: owner ?? '', key: idempotencyKey, fingerprint: canonicalHash(request) };
    const token = randomUUID();
    const creation = await this.deps.repository.jobs.insert(
      { id: randomUUID(), owner, request, callback_url: request.callback_url ?? null },
      { instance: this.instance, token, leaseMs: this.deps.config.JOB_LEASE_MS },
      idempotency,
    );
    if (!creation.created) {
      if (creation.fingerprint !== idempotency?.fingerprint)
        throw idempotencyKeyReused(
          `the Idempotency-Key was used with a different request (it submitted job ${creation.job.id}); use a new key for a new request`,
        );
      return { job: creation.job, replayed: true };
    }
    this.hold(creation.job, token);
    return { job: creation.job, replayed: false };
  }

  /** Runs a job this process holds in the background (its pipeline when unfinished, else its callback), renewing its lease meanwhile. */
  private hold(job: JobRow, token: string): void {
    const lease = { id: job.id, token };
    const controller = new AbortController();
    this.held.set(job.id, { lease, controller });
    const work =
      job.status === 'queued' || job.status === 'running'
        ? this.runJob(job, lease, controller.signal)
        : this.callBack(job, lease, storedOutcome(job), controller.signal);
    const running = work
      .catch((error: unknown) => this.deps.logger.error({ err: error, job: job.id }, 'job bookkeeping failed'))
      .finally(() => {
        if (this.held.get(job.id)?.lease === lease) this.held.delete(job.id);
      });
    this.jobs.add(running);
    void running.finally(() => this.jobs.delete(running));
  }

  private async runJob(job: JobRow, lease: JobLease, signal: AbortSignal): Promise<void> {
    const repository = this.deps.repository;
    // A job that is gone was its owner's, whose account was deleted: nothing more is done or sent for it.
    if (job.status === 'queued' && !(await repository.jobs.start(lease))) return;
    let outcome: JobOutcome;
    try {
      const scene = await this.generate(job.request, this.prepare(job.request, job.owner), job.owner, 'async', { signal }, lease);
      outcome = { status: 'completed', scene, timepoint_id: scene.id };
    } catch (error) {
      const problem = problemOf(error);
      const detail = { status: problem.status, detail: problem.message, agent: (problem.extensions.agent as string | null | undefined) ?? null };
      // Not recorded when the job is no longer this process's: taken over, or gone with its owner's account.
      if (!(await repository.jobs.update(lease, { status: 'failed', error: detail, finished_at: new Date() }))) return;
      outcome = { status: 'failed', error: detail };
    }
    await this.callBack(job, lease, outcome, signal);
  }

  private async callBack(job: JobRow, lease: JobLease, outcome: JobOutcome, signal: AbortSignal): Promise<void> {
    if (!job.callback_url) return;
    const secret = this.deps.config.CALLBACK_SECRET;
    if (!secret) {
      await this.deps.repository.jobs.update(lease, { callback_status: 'failed', callback_error: 'this server has no CALLBACK_SECRET to sign callbacks with' });
      return;
    }
    // A job taken over for its callback sends its scene as stored (null when its owner deleted it meanwhile).
    const stored =
      outcome.status === 'completed' && !outcome.scene && outcome.timepoint_id ? await this.deps.repository.timepoints.get(outcome.timepoint_id) : undefined;
    const scene = outcome.status === 'completed' ? (outcome.scene ?? stored?.record ?? null) : null;
    const payload =
      outcome.status === 'completed'
        ? { job_id: job.id, status: 'completed', timepoint_id: outcome.timepoint_id, timepoint: scene, request_context: job.request.request_context ?? null }
        : { job_id: job.id, status: 'failed', timepoint_id: null, error: outcome.error, request_context: job.request.request_context ?? null };
    const delivery = await deliverCallback(job.callback_url, job.id, payload, {
      secret,
      policy: this.callbackPolicy,
      maxAttempts: this.deps.config.CALLBACK_MAX_ATTEMPTS,
      backoffMs: this.deps.config.CALLBACK_BACKOFF_MS,
      timeoutMs: this.deps.config.CALLBACK_TIMEOUT_MS,
      logger: this.deps.logger,
      signal,
      onAttempt: (attempt) => {
        if (attempt > 1) this.deps.metrics.callbacks.inc({ outcome: 'retried' });
      },
    });
    this.deps.metrics.callbacks.inc({ outcome: delivery.delivered ? 'delivered' : 'failed' });
    await this.deps.repository.jobs.update(lease, {
      callback_status: delivery.delivered ? 'delivered' : 'failed',
      callback_attempts: delivery.attempts,
      callback_error: delivery.error ?? null,
    });
  }

  /**
   * Keeps this process's job leases alive and takes over the jobs whose lease lapsed, now and every third
   * of JOB_LEASE_MS until `close`.
   */
  start(): void {
    const tick = () => {
      this.leaseRound = this.leaseTick()
        .catch((error: unknown) => this.deps.logger.warn({ err: error }, 'renewing or taking over job leases failed'))
        .finally(() => {
          if (!this.closed) this.leaseTimer = setTimeout(tick, Math.ceil(this.deps.config.JOB_LEASE_MS / 3)).unref();
        });
    };
    tick();
  }

  private async leaseTick(): Promise<void> {
    const leaseMs = this.deps.config.JOB_LEASE_MS;
    await this.deps.repository.jobs.renewLeases(
      [...this.held.values()].map((entry) => entry.lease),
      leaseMs,
    );
    // A stopping process takes on nothing new.
    while (this.drainDeadline === undefined) {
      const token = randomUUID();
      const claimed = await this.deps.repository.jobs.claimExpired(
        { instance: this.instance, token, leaseMs },
        // A job of the previous release (no lease) is lost once it outlived any generation and its callback could.
        { legacyMs: this.deps.config.GENERATION_TIMEOUT_MS + 60_000, maxRuns: MAX_RUNS, limit: SWEEP_BATCH, interrupted: INTERRUPTED },
      );
      for (const job of claimed) {
        this.deps.logger.warn({ job: job.id, status: job.status, attempts: job.attempts }, 'took over a job whose replica stopped without finishing it');
        if (job.status === 'running' || job.callback_status === 'pending') this.hold(job, token);
      }
      if (claimed.length < SWEEP_BATCH) return;
    }
  }

  /** The process is asked to stop: new generations are refused from now on, and its jobs have SHUTDOWN_GRACE_MS to end. */
  beginDrain(): void {
    this.drainDeadline ??= Date.now() + this.deps.config.SHUTDOWN_GRACE_MS;
  }

  /**
   * Shutdown: waits for the jobs this process holds until the grace ends, then hands back those still
   * under way (their leases lapse now, so another replica takes them over, re-running an unfinished one
   * once) and stops their work here.
   */
  async close(): Promise<void> {
    this.beginDrain();
    const left = Math.max(0, (this.drainDeadline ?? 0) - Date.now());
    await Promise.race([Promise.allSettled([...this.jobs]), new Promise((resolve) => setTimeout(resolve, left).unref())]);
    this.closed = true;
    clearTimeout(this.leaseTimer);
    await this.leaseRound;
    const unfinished = [...this.held.values()];
    if (unfinished.length === 0) return;
    await this.deps.repository.jobs.releaseLeases(unfinished.map((entry) => entry.lease));
    for (const entry of unfinished) entry.controller.abort(new StepFailed(null, 'cancelled', 'the replica stopped; the job was handed to another'));
    this.deps.logger.warn(
      { jobs: unfinished.map((entry) => entry.lease.id) },
      'handed jobs still under way at the end of the shutdown grace back to other replicas',
    );
  }
}

/** How a job that was taken over with its callback still pending ended, from its row. */
function storedOutcome(job: JobRow): JobOutcome {
  if (job.status === 'completed') return { status: 'completed', scene: null, timepoint_id: job.timepoint_id };
  return { status: 'failed', error: job.error ?? INTERRUPTED };
}
