import { randomUUID } from 'node:crypto';
import { idempotencyKeyReused, Problem, toProblem, unexpectedProblem, unprocessable } from '@tempora/kit/http';
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
import type { ProviderSet } from './providers.ts';
import type { GenerationRepository, JobRow, OwnerErasure } from './repository.ts';
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

/** Why a generation failed, as the problem the client receives. */
export function problemOf(error: unknown): Problem {
  if (error instanceof Problem) return error;
  if (error instanceof JudgeRejected) {
    return new Problem(422, `the Judge rejected the query: ${error.message}`, {
      title: 'Query rejected',
      type: 'https://tempora.dev/problems/query-rejected',
      errors: [{ path: 'body.query', message: error.message }],
    });
  }
  if (error instanceof StepFailed) {
    if (error.code === 'timeout') return new Problem(504, error.message, { extensions: { agent: error.agent, code: error.code } });
    if (error.code === 'cancelled') return new Problem(503, error.message, { title: 'Cancelled' });
    return new Problem(502, error.message, { extensions: { agent: error.agent, code: error.code } });
  }
  // A database outage is a 503 with Retry-After, as the kit answers it.
  return toProblem(error) ?? unexpectedProblem();
}

/** Why an owner's generation stopped, or stored nothing, when their account was deleted meanwhile. */
const accountDeleted = () => new StepFailed(null, 'cancelled', "the owner's account was deleted; nothing was stored");

export class Generator {
  private readonly deps: GeneratorDeps;
  readonly callbackPolicy: CallbackPolicy;
  private readonly jobs = new Set<Promise<void>>();
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
  ): Promise<SceneRecord> {
    if (owner === null) return this.run(request, selection, null, mode, options);
    const controller = new AbortController();
    const outer = options.signal;
    const forward = () => controller.abort(outer?.reason);
    if (outer?.aborted) forward();
    outer?.addEventListener('abort', forward, { once: true });
    const mine = this.running.get(owner) ?? new Set();
    this.running.set(owner, mine.add(controller));
    try {
      return await this.run(request, selection, owner, mode, { ...options, signal: controller.signal });
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
      const stored = await this.deps.repository.insertTimepoint(
        record,
        image?.data ? { data: Buffer.from(image.data, 'base64'), mime_type: image.mime_type } : null,
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
    const erased = await this.deps.repository.eraseOwner(owner, this.deps.config.GENERATION_TIMEOUT_MS + 60_000);
    for (const controller of this.running.get(owner) ?? []) controller.abort(accountDeleted());
    return erased;
  }

  /**
   * Async generation: the job row now, the pipeline and the callback in the background. With an
   * `idempotencyKey` (its owner's own), the key is stored with the job; a request that comes with a key
   * already stored submits nothing and is given that key's job (`replayed`), if the request is the same
   * (else 422).
   */
  async submit(request: GenerateRequest, selection: Selection, owner: string | null, idempotencyKey?: string): Promise<{ job: JobRow; replayed: boolean }> {
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
    const creation = await this.deps.repository.insertJob({ id: randomUUID(), owner, request, callback_url: request.callback_url ?? null }, idempotency);
    if (!creation.created) {
      if (creation.fingerprint !== idempotency?.fingerprint)
        throw idempotencyKeyReused(
          `the Idempotency-Key was used with a different request (it submitted job ${creation.job.id}); use a new key for a new request`,
        );
      return { job: creation.job, replayed: true };
    }
    const { job } = creation;
    const running = this.runJob(job, request, selection, owner).catch((error: unknown) =>
      this.deps.logger.error({ err: error, job: job.id }, 'job bookkeeping failed'),
    );
    this.jobs.add(running);
    void running.finally(() => this.jobs.delete(running));
    return { job, replayed: false };
  }

  private async runJob(job: JobRow, request: GenerateRequest, selection: Selection, owner: string | null): Promise<void> {
    const repository = this.deps.repository;
    // A job that is gone was its owner's, whose account was deleted: nothing more is done or sent for it.
    if (!(await repository.updateJob(job.id, { status: 'running' }))) return;
    let payload: Record<string, unknown>;
    let kept: boolean;
    try {
      const scene = await this.generate(request, selection, owner, 'async');
      kept = await repository.updateJob(job.id, { status: 'completed', timepoint_id: scene.id, finished_at: new Date() });
      payload = { job_id: job.id, status: 'completed', timepoint_id: scene.id, timepoint: scene, request_context: request.request_context ?? null };
    } catch (error) {
      const problem = problemOf(error);
      const detail = { status: problem.status, detail: problem.message, agent: (problem.extensions.agent as string | null | undefined) ?? null };
      kept = await repository.updateJob(job.id, { status: 'failed', error: detail, finished_at: new Date() });
      payload = { job_id: job.id, status: 'failed', timepoint_id: null, error: detail, request_context: request.request_context ?? null };
    }
    if (!kept || !job.callback_url || !this.deps.config.CALLBACK_SECRET) return;
    const outcome = await deliverCallback(job.callback_url, job.id, payload, {
      secret: this.deps.config.CALLBACK_SECRET,
      policy: this.callbackPolicy,
      maxAttempts: this.deps.config.CALLBACK_MAX_ATTEMPTS,
      backoffMs: this.deps.config.CALLBACK_BACKOFF_MS,
      timeoutMs: this.deps.config.CALLBACK_TIMEOUT_MS,
      logger: this.deps.logger,
      onAttempt: (attempt) => {
        if (attempt > 1) this.deps.metrics.callbacks.inc({ outcome: 'retried' });
      },
    });
    this.deps.metrics.callbacks.inc({ outcome: outcome.delivered ? 'delivered' : 'failed' });
    await repository.updateJob(job.id, {
      callback_status: outcome.delivered ? 'delivered' : 'failed',
      callback_attempts: outcome.attempts,
      callback_error: outcome.error ?? null,
    });
  }

  /** Waits for background jobs (shutdown). */
  async drain(timeoutMs: number): Promise<void> {
    await Promise.race([Promise.allSettled([...this.jobs]), new Promise((resolve) => setTimeout(resolve, timeoutMs).unref())]);
  }
}
