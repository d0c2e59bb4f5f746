import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { SpanStatusCode } from '@opentelemetry/api';
import { type Logger, processStoredWork } from '@tempora/kit/observability';
import type { GraphConfig } from '../config.ts';
import type { GraphService } from '../graph-service.ts';
import type { ClaimedRenderJob } from '../repository/index.ts';
import { BudgetExhausted, SpendBudget } from './budget.ts';
import { renderCostUsd } from './costs.ts';
import { GenerationClient, RenderError, type RenderedScene, type RenderRequest } from './generation-client.ts';
import { PollingLoop } from './loop.ts';
import type { GraphWorkerMetrics, RenderOutcome } from './metrics.ts';
import { inputOf } from './moments.ts';

export interface RendererOptions {
  graph: GraphService;
  generation: GenerationClient;
  budget: SpendBudget;
  logger: Logger;
  /** Names this process's claims; a reclaimed job cannot be completed by the worker that lost it. */
  workerId: string;
  concurrency: number;
  maxAttempts: number;
  backoffMs: number;
  staleMs: number;
  pollMs: number;
  /** Counts the jobs' outcomes and durations, and exports the budget (the renderer worker's). */
  metrics?: GraphWorkerMetrics;
}

/** The variables a renderer is built from (`rendererConfigFields`, GENERATION_URL and SERVICE_KEY). */
export type RendererConfig = Pick<
  GraphConfig,
  | 'GENERATION_URL'
  | 'GENERATION_SERVICE_KEY'
  | 'SERVICE_KEY'
  | 'WORKER_CONCURRENCY'
  | 'WORKER_DAILY_BUDGET_USD'
  | 'WORKER_POLL_MS'
  | 'RENDER_TIMEOUT_MS'
  | 'RENDER_MAX_ATTEMPTS'
  | 'RENDER_BACKOFF_MS'
  | 'RENDER_STALE_MS'
>;

/**
 * A renderer over `graph` configured from the environment: the renderer worker's, and the graph service's
 * own when it renders in process (GRAPH_RENDERER). Not started.
 */
export function createRenderer(graph: GraphService, config: RendererConfig, logger: Logger, metrics?: GraphWorkerMetrics): Renderer {
  return new Renderer({
    graph,
    generation: new GenerationClient(config.GENERATION_URL, config.GENERATION_SERVICE_KEY ?? config.SERVICE_KEY[0], config.RENDER_TIMEOUT_MS),
    budget: new SpendBudget(graph.repository.spend, 'renderer', config.WORKER_DAILY_BUDGET_USD),
    logger,
    workerId: `${hostname()}:${randomUUID()}`,
    concurrency: config.WORKER_CONCURRENCY,
    maxAttempts: config.RENDER_MAX_ATTEMPTS,
    backoffMs: config.RENDER_BACKOFF_MS,
    staleMs: config.RENDER_STALE_MS,
    pollMs: config.WORKER_POLL_MS,
    ...(metrics ? { metrics } : {}),
  });
}

/** A job's request as the generation service takes it, and the trace context of the request that queued it. */
function requestOf(job: ClaimedRenderJob): { request: RenderRequest; trace: Record<string, string> } {
  const { trace: carrier, ...request } = job.request as unknown as RenderRequest & { trace?: Record<string, string> };
  return { request, trace: carrier ?? {} };
}

/**
 * The Renderer: claims queued render jobs (any number of replicas, each up to `concurrency` at a time),
 * renders each moment through the generation service and upgrades it to layer 2 with the scene.
 */
export class Renderer {
  private readonly options: RendererOptions;
  private readonly inFlight = new Map<string, { done: Promise<void>; abort: AbortController }>();
  private readonly loop: PollingLoop;
  /** Set when the budget is spent: nothing is claimed before then. */
  private pausedUntil: Date | undefined;
  processed = 0;

  constructor(options: RendererOptions) {
    this.options = options;
    this.loop = new PollingLoop('renderer', () => this.tick(), options.pollMs, options.logger);
    options.metrics?.watch(options.budget);
  }

  start(): void {
    this.loop.start();
  }

  /** One poll: reclaims stale jobs, claims what fits in the free slots and starts them. Returns the jobs started. */
  async tick(): Promise<number> {
    const { graph, logger, staleMs, maxAttempts, workerId, concurrency } = this.options;
    for (const job of await graph.repository.renderJobs.reclaimStale(staleMs, maxAttempts))
      logger.warn({ job: job.id, status: job.status }, 'reclaimed a render job whose worker stopped');
    if (this.pausedUntil && this.pausedUntil > new Date()) return 0;
    const free = concurrency - this.inFlight.size;
    if (free <= 0) return 0;
    const jobs = await graph.repository.renderJobs.claim(workerId, free);
    for (const job of jobs) {
      const abort = new AbortController();
      const done = this.traced(job, abort.signal)
        .then((outcome) => this.count(outcome))
        .catch((error: unknown) => {
          this.count('error');
          logger.error({ err: error, job: job.id }, 'render job left running; it is reclaimed after RENDER_STALE_MS');
        })
        .finally(() => {
          this.inFlight.delete(job.id);
          this.loop.wake();
        });
      this.inFlight.set(job.id, { done, abort });
    }
    return jobs.length;
  }

  /** Resolves when every job started so far has finished (tests). */
  async idle(): Promise<void> {
    while (this.inFlight.size > 0) await Promise.all([...this.inFlight.values()].map((job) => job.done));
  }

  private count(outcome: RenderOutcome): void {
    this.options.metrics?.jobs.inc({ role: 'renderer', outcome });
  }

  /** A job's attempt in a `process render_jobs` span: the render, its generation call and its agents join the trace of the POST /generate that queued it. */
  private traced(job: ClaimedRenderJob, signal: AbortSignal): Promise<RenderOutcome> {
    const attributes = { 'tempora.render.path': job.path, 'tempora.render.attempt': job.attempts };
    return processStoredWork('tempora-graph', { queue: 'render_jobs', id: job.id, carrier: requestOf(job).trace, attributes }, async (span) => {
      try {
        const outcome = await this.process(job, signal);
        span.setAttribute('tempora.render.outcome', outcome);
        if (outcome === 'failed' || outcome === 'retried') span.setStatus({ code: SpanStatusCode.ERROR, message: `render ${outcome}` });
        return outcome;
      } catch (error) {
        span.setStatus({ code: SpanStatusCode.ERROR, message: (error as Error).message });
        throw error;
      } finally {
        span.end();
      }
    });
  }

  private async process(job: ClaimedRenderJob, signal: AbortSignal): Promise<RenderOutcome> {
    const { graph, generation, budget, logger, workerId, maxAttempts, backoffMs } = this.options;
    const log = logger.child({ job: job.id, path: job.path, attempt: job.attempts });
    const jobs = graph.repository.renderJobs;
    if (job.moment_status === 'archived') {
      // The judge rejected the moment after the job was queued: rendering it would be paid for nothing.
      await jobs.failAttempt(job.id, workerId, 'the moment was archived (rejected by moderation) before it was rendered', 0, 0);
      return 'failed';
    }
    const { request } = requestOf(job);
    try {
      await budget.charge(renderCostUsd(request));
    } catch (error) {
      if (!(error instanceof BudgetExhausted)) throw error;
      this.pausedUntil = error.until;
      log.warn({ until: error.until }, 'daily budget spent; render jobs wait for the next UTC day');
      await jobs.release(job.id, workerId, error.until);
      return 'released';
    }
    const timer = this.options.metrics?.jobDuration.startTimer({ role: 'renderer' });
    try {
      // A private moment's scene belongs to whoever asked for the render: the moment has no owner of its own.
      const privateTo = job.moment_visibility === 'private' ? job.requested_by : undefined;
      const scene = await generation.render(request, { jobId: job.id, path: job.path, privateTo }, signal);
      await this.upgrade(job.path, scene);
      if (await jobs.complete(job.id, workerId, scene.id)) {
        this.processed += 1;
        log.info({ scene: scene.id }, 'moment rendered to layer 2');
        return 'rendered';
      }
      log.warn('render finished after the job was reclaimed; the scene is kept on the moment');
      return 'lost';
    } catch (error) {
      if (signal.aborted) {
        await jobs.release(job.id, workerId, new Date());
        log.info('render interrupted by shutdown; job released');
        return 'released';
      }
      const retryable = !(error instanceof RenderError) || error.retryable;
      const status = await jobs.failAttempt(job.id, workerId, (error as Error).message, retryable ? maxAttempts : 0, backoffMs);
      log.warn({ err: error, status }, status === 'failed' ? 'render job failed' : 'render attempt failed; will retry');
      return status === 'failed' ? 'failed' : status === 'queued' ? 'retried' : 'lost';
    } finally {
      timer?.();
    }
  }

  /** Layer 2: the scene's image, summary, historical figures, confidence and coordinates join the moment. */
  private async upgrade(path: string, scene: RenderedScene): Promise<void> {
    const { graph, generation } = this.options;
    const row = await graph.moment(path, true);
    if (!row) throw new RenderError(`the moment ${path} no longer exists`, false);
    const historical = scene.characters.filter((character) => character.is_historical).map((character) => character.name.trim().slice(0, 200));
    // The generation service reports a place it could not fix as (0, 0) (docs/generation.md): not a place.
    const { latitude, longitude } = scene.location;
    const located = latitude != null && longitude != null && !(latitude === 0 && longitude === 0);
    await graph.writeMoments([
      inputOf(row, {
        layer: 2,
        image_url: generation.imageUrl(scene) ?? row.image_url,
        description: row.description || (scene.moment.summary ?? scene.scene.description ?? '').slice(0, 2000),
        figures: [...new Set([...row.figures, ...historical])].filter(Boolean).slice(0, 50),
        confidence: scene.confidence.overall ?? row.confidence,
        latitude: row.latitude ?? (located ? latitude : null),
        longitude: row.longitude ?? (located ? longitude : null),
      }),
    ]);
  }

  /**
   * Stops claiming, lets the jobs in flight finish for up to `graceMs`, then interrupts the rest and gives
   * them back to the queue, so another replica picks them up at once rather than after RENDER_STALE_MS.
   */
  async stop(graceMs: number): Promise<void> {
    await this.loop.stop(graceMs);
    const pending = [...this.inFlight.values()];
    let timer: NodeJS.Timeout | undefined;
    const graceOver = new Promise<'timeout'>((resolve) => {
      timer = setTimeout(() => resolve('timeout'), graceMs);
    });
    if ((await Promise.race([Promise.all(pending.map((job) => job.done)), graceOver])) === 'timeout') {
      for (const job of pending) job.abort.abort();
      await Promise.all(pending.map((job) => job.done));
    }
    clearTimeout(timer);
  }
}
