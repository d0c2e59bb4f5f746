import { randomUUID } from 'node:crypto';
import type { Knex } from '@tempora/kit/data';
import { ServiceClient } from '@tempora/kit/http';
import type { Logger } from '@tempora/kit/observability';
import { z } from 'zod';
import type { Credits } from './domain/credits.ts';
import { UPSTREAMS, type UpstreamName, type UpstreamTarget } from './proxy/routing.ts';

interface ChargedJobRow {
  charge_key: string;
  user_id: string;
  upstream: string;
  /** The job's path (and query) on its upstream. */
  location: string;
  checks: number;
}

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

const seconds = (ms: number) => ms / 1000;

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

/** How a charge stands now: its job still followed, refunded (and why), or standing. */
export interface ChargeStanding {
  state: 'following' | 'refunded' | 'stands';
  charged: number;
  refunded: number;
  reason: string | null;
}

/**
 * Registers jobs to follow and says how their charges stand: what the proxy and the services' ledger
 * routes need, without the upstreams' addresses. Whichever replica's ChargedJobs finds a registered job due
 * checks it, so the gateway alone decides whether a job's charge stands, however the job was started.
 */
export class ChargedJobBook {
  private readonly knex: Knex;
  private readonly credits: Credits;
  private readonly checkMs: number;

  constructor(knex: Knex, credits: Credits, checkMs: number) {
    this.knex = knex;
    this.credits = credits;
    this.checkMs = checkMs;
  }

  /** Follows the job at `location` (its path, and query, on `upstream`) that the charge `chargeKey` paid for. */
  async follow(userId: string, chargeKey: string, upstream: UpstreamName, location: string): Promise<void> {
    await this.knex.transaction(async (trx) => {
      await trx('charged_jobs')
        .insert({
          charge_key: chargeKey,
          user_id: userId,
          upstream,
          location,
          check_after: trx.raw('now() + make_interval(secs => ?)', [seconds(this.checkMs)]),
        })
        .onConflict(['user_id', 'charge_key'])
        .ignore();
      // Followed from now on: the job's end settles the charge, no longer the call's.
      await this.credits.close(userId, chargeKey, trx);
    });
  }

  /** The charge booked under `chargeKey` as it stands; undefined when there is none. */
  async standing(userId: string, chargeKey: string): Promise<ChargeStanding | undefined> {
    const row = await this.knex('credit_ledger as c')
      .leftJoin('credit_ledger as r', 'r.refund_of', 'c.id')
      .where({ 'c.user_id': userId, 'c.idempotency_key': chargeKey, 'c.kind': 'charge' })
      .first<{ charged: string; refunded: string | null; reason: string | null; following: boolean } | undefined>(
        'c.amount as charged',
        'r.amount as refunded',
        this.knex.raw(`r.metadata->>'reason' as reason`),
        this.knex.raw('exists (select 1 from charged_jobs j where j.charge_key = c.idempotency_key and j.user_id = c.user_id) as following'),
      );
    if (!row) return undefined;
    const refunded = row.refunded === null ? 0 : Number(row.refunded);
    const state = row.refunded !== null ? 'refunded' : row.following ? 'following' : 'stands';
    return { state, charged: -Number(row.charged), refunded, reason: row.refunded !== null ? row.reason : null };
  }
}

/**
 * Follows the jobs that charged calls started: a chargeable call the upstream accepted for later (202
 * with a Location, as `POST /api/v1/timepoints/generate` and `POST /api/v1/simulate` answer) has
 * delivered nothing yet, whether the proxy forwarded it or a service that charged through
 * `/credits/charge` made it (the conductor's `start_simulation`, registered with `POST /credits/follow`). The job's resource is asked for its `status` until it ends (see `settlementOf`);
 * a job the upstream no longer knows (404) is refunded too. Kept in PostgreSQL, so a restart or another
 * replica carries on where this one stopped.
 */
export class ChargedJobs {
  private readonly knex: Knex;
  private readonly credits: Credits;
  private readonly settings: ChargedJobSettings;
  private readonly logger: Logger;
  private readonly upstreams: ReadonlyMap<string, ServiceClient>;
  /** The book of followed jobs, for the services' hand-overs (POST /credits/follow) as for the proxy's. */
  readonly book: ChargedJobBook;
  private timer: NodeJS.Timeout | undefined;
  private round: Promise<unknown> = Promise.resolve();
  private stopped = false;

  constructor(knex: Knex, credits: Credits, settings: ChargedJobSettings, logger: Logger) {
    this.knex = knex;
    this.credits = credits;
    this.settings = settings;
    this.logger = logger;
    this.upstreams = new Map(
      UPSTREAMS.map((name) => [
        name,
        new ServiceClient(settings.upstreams[name].url, settings.upstreams[name].serviceKey, CHECK_TIMEOUT_MS, `the ${name} service`),
      ]),
    );
    this.book = new ChargedJobBook(knex, credits, settings.checkMs);
  }

  /** Follows the job at `location` (already resolved against the call's URL) that the charge `chargeKey` paid for. */
  follow(userId: string, chargeKey: string, upstream: UpstreamName, location: URL): Promise<void> {
    return this.book.follow(userId, chargeKey, upstream, `${location.pathname}${location.search}`);
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
      const result = await this.knex.raw<{ rows: ChargedJobRow[] }>(
        `update charged_jobs set check_after = now() + make_interval(secs => ?), checks = checks + 1
         where (user_id, charge_key) in (select user_id, charge_key from charged_jobs where check_after <= now() order by check_after limit ? for update skip locked)
         returning charge_key, user_id, upstream, location, checks`,
        [seconds(LEASE_MS), BATCH],
      );
      await Promise.all(result.rows.map((job) => this.check(job)));
      checked += result.rows.length;
      if (result.rows.length < BATCH || this.stopped) return checked;
    }
  }

  private async check(job: ChargedJobRow): Promise<void> {
    const settlement = await this.settlementOf(job).catch((error: unknown) => {
      this.logger.debug({ err: error, job: job.location }, 'charged job not checked');
      return undefined;
    });
    if (settlement?.charge === 'stands') return this.forget(job);
    if (settlement?.charge === 'refunded') {
      const outcome = await this.credits.refund(job.user_id, job.charge_key, settlement.reason).catch((error: unknown) => {
        this.logger.error({ err: error, user: job.user_id, charge: job.charge_key }, 'refund failed');
        return null;
      });
      if (outcome !== null) return this.forget(job);
    }
    const delay = Math.min(MAX_CHECK_MS, this.settings.checkMs * 2 ** Math.min(job.checks, 16));
    await this.knex('charged_jobs')
      .where({ user_id: job.user_id, charge_key: job.charge_key })
      .update({ check_after: this.knex.raw('now() + make_interval(secs => ?)', [seconds(delay)]) });
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

  private async forget(job: ChargedJobRow): Promise<void> {
    await this.knex('charged_jobs').where({ user_id: job.user_id, charge_key: job.charge_key }).delete();
  }
}
