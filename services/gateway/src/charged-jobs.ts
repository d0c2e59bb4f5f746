import { randomUUID } from 'node:crypto';
import { ServiceClient } from '@tempora/kit/http';
import type { Logger } from '@tempora/kit/observability';
import { z } from 'zod';
import type { Credits } from './domain/credits.ts';
import { UPSTREAMS, type UpstreamName, type UpstreamTarget } from './proxy/routing.ts';
import type { ChargedJobRow, ChargedJobRows } from './repository/index.ts';

export interface ChargedJobSettings {
  upstreams: Record<UpstreamName, UpstreamTarget>;
  /** CHARGED_JOB_CHECK_MS: the first check after this long; then twice as long each time, up to MAX_CHECK_MS. */
  checkMs: number;
}

const MAX_CHECK_MS = 60_000;
/** How long a replica holds a job it is checking; another takes it up after that if this one stopped. */
const LEASE_MS = 60_000;
const CHECK_TIMEOUT_MS = 10_000;
const BATCH = 20;

/** The fields of a job's resource the gateway reads: the generation service's job, the simulation service's run (with its progress). */
const JobResource = z.object({ status: z.string(), progress: z.object({ steps_done: z.number().int() }).optional() });
type JobResource = z.output<typeof JobResource>;

export type Settlement = { charge: 'stands' } | { charge: 'refunded'; reason: string };

/**
 * How an ended job settles its charge, or undefined while it is under way. The charge stands when the job
 * delivered something, whole or partial: `completed`, and a simulation run that ended `stopped` (at its
 * cost maximum) or `cancelled` (by its owner) with at least one completed step, whose partial result is
 * kept and marked. It is refunded when the job delivered nothing: `failed`, and `stopped` or `cancelled`
 * before any step completed (e.g. cancelled while queued).
 */
export function settlementOf(job: JobResource): Settlement | undefined {
  if (job.status === 'completed') return { charge: 'stands' };
  if (job.status === 'failed') return { charge: 'refunded', reason: 'the job failed' };
  if (job.status !== 'stopped' && job.status !== 'cancelled') return undefined;
  if ((job.progress?.steps_done ?? 0) > 0) return { charge: 'stands' };
  return { charge: 'refunded', reason: `the job was ${job.status} before it delivered anything` };
}

const GONE: Settlement = { charge: 'refunded', reason: 'the job is gone' };

/**
 * Follows the jobs that charged calls started: a chargeable call the upstream accepted for later (202
 * with a Location, as `POST /api/v1/timepoints/generate` and `POST /api/v1/simulate` answer) has
 * delivered nothing yet, whether the proxy forwarded it or a service that charged through
 * `/credits/charge` made it (the conductor's `start_simulation`, registered with `POST /credits/follow`). The job's resource is asked for its `status` until it ends (see `settlementOf`);
 * a job the upstream no longer knows (404) is refunded too. Kept in PostgreSQL, so a restart or another
 * replica carries on where this one stopped.
 */
export class ChargedJobs {
  private readonly jobs: ChargedJobRows;
  private readonly credits: Credits;
  private readonly settings: ChargedJobSettings;
  private readonly logger: Logger;
  private readonly upstreams: ReadonlyMap<string, ServiceClient>;
  private timer: NodeJS.Timeout | undefined;
  private round: Promise<unknown> = Promise.resolve();
  private stopped = false;

  constructor(jobs: ChargedJobRows, credits: Credits, settings: ChargedJobSettings, logger: Logger) {
    this.jobs = jobs;
    this.credits = credits;
    this.settings = settings;
    this.logger = logger;
    this.upstreams = new Map(
      UPSTREAMS.map((name) => [
        name,
        new ServiceClient(settings.upstreams[name].url, settings.upstreams[name].serviceKey, CHECK_TIMEOUT_MS, `the ${name} service`),
      ]),
    );
  }

  /**
   * Follows the job at `location` (its path, and query, on `upstream`) that the charge `chargeKey` paid
   * for: the proxy's charged calls and the services' hand-overs (POST /credits/follow) alike.
   */
  follow(userId: string, chargeKey: string, upstream: UpstreamName, location: string): Promise<void> {
    return this.jobs.follow(userId, chargeKey, upstream, location, this.settings.checkMs);
  }

  /**
   * Checks due jobs every CHARGED_JOB_CHECK_MS until `stop`, and refunds the charges of calls that a
   * stopped replica left unsettled (Credits.refundUnsettled).
   */
  start(): void {
    const tick = () => {
      this.round = Promise.all([
        this.checkDue().catch((error: unknown) => this.logger.warn({ err: error }, 'checking charged jobs failed')),
        this.credits.refundUnsettled().catch((error: unknown) => this.logger.warn({ err: error }, 'refunding unsettled charges failed')),
      ]).finally(() => {
        if (!this.stopped) this.timer = setTimeout(tick, this.settings.checkMs).unref();
      });
    };
    this.timer = setTimeout(tick, this.settings.checkMs).unref();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.round;
  }

  /** One round: every job due is checked once; how many were. */
  async checkDue(): Promise<number> {
    let checked = 0;
    for (;;) {
      const due = await this.jobs.claimDue(LEASE_MS, BATCH);
      await Promise.all(due.map((job) => this.check(job)));
      checked += due.length;
      if (due.length < BATCH || this.stopped) return checked;
    }
  }

  private async check(job: ChargedJobRow): Promise<void> {
    const settlement = await this.settlementOf(job).catch((error: unknown) => {
      this.logger.debug({ err: error, job: job.location }, 'charged job not checked');
      return undefined;
    });
    if (settlement?.charge === 'stands') return this.jobs.forget(job);
    if (settlement?.charge === 'refunded') {
      const outcome = await this.credits.refund(job.user_id, job.charge_key, settlement.reason).catch((error: unknown) => {
        this.logger.error({ err: error, user: job.user_id, charge: job.charge_key }, 'refund failed');
        return null;
      });
      if (outcome !== null) return this.jobs.forget(job);
    }
    const delay = Math.min(MAX_CHECK_MS, this.settings.checkMs * 2 ** Math.min(job.checks, 16));
    await this.jobs.postpone(job, delay);
  }

  /** How the job settles (refunded when its upstream answers 404), or undefined while it runs or could not be read. */
  private async settlementOf(job: ChargedJobRow): Promise<Settlement | undefined> {
    const upstream = this.upstreams.get(job.upstream);
    if (!upstream) return undefined;
    const reply = await upstream.call('GET', job.location, { requestId: randomUUID(), headers: { 'x-user-id': job.user_id } });
    if (reply.status === 404) return GONE;
    if (reply.status !== 200) return undefined;
    // An answer outside the schema throws: the job is checked again later, its charge untouched.
    return settlementOf(reply.json(JobResource));
  }
}
