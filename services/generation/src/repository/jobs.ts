import { claimIdempotencyKey, type IdempotencyKey, type Knex, oldestFirst, positionTime } from '@tempora/kit/data';
import type { GenerateRequest } from '../schemas.ts';
import type { ExportedJob, JobCreation, JobLease, JobRow, LeaseHolder } from './rows.ts';

const JOB_KEYS = { table: 'generation_idempotency_keys', column: 'job_id', target: 'generation_jobs' };

/** The jobs whose lease lapsed: not finished, or finished with a callback still to deliver. */
const UNSETTLED = `(status in ('queued', 'running') or callback_status = 'pending')`;
const leaseEnd = (knex: Knex, ms: number) => knex.raw(`now() + ? * interval '1 millisecond'`, [ms]);

/** The job, only while `lease` still holds it: a process that lost its job writes nothing on it. */
export const fenced = (knex: Knex, lease: JobLease) => knex('generation_jobs').where({ id: lease.id, lease_token: lease.token });

/** Asynchronous generations: their rows, the leases that say which process runs them, their Idempotency-Keys. */
export class Jobs {
  private readonly knex: Knex;

  constructor(knex: Knex) {
    this.knex = knex;
  }

  /**
   * Inserts a job. With `idempotency`, its key is claimed first, in the same transaction
   * (claimIdempotencyKey): of concurrent requests with one key, one inserts the job and the rest find it.
   */
  async insert(
    job: { id: string; owner: string | null; request: GenerateRequest; callback_url: string | null },
    holder: LeaseHolder,
    idempotency?: IdempotencyKey,
  ): Promise<JobCreation> {
    return this.knex.transaction(async (trx): Promise<JobCreation> => {
      const earlier = idempotency && (await claimIdempotencyKey<JobRow>(trx, JOB_KEYS, idempotency, job.id));
      if (earlier) return { created: false, job: earlier.row, fingerprint: earlier.fingerprint };
      const rows = await trx('generation_jobs')
        .insert({
          id: job.id,
          owner: job.owner,
          request: JSON.stringify(job.request),
          callback_url: job.callback_url,
          callback_status: job.callback_url ? 'pending' : 'none',
          owner_instance: holder.instance,
          lease_token: holder.token,
          lease_until: leaseEnd(trx, holder.leaseMs),
        })
        .returning('*');
      return { created: true, job: rows[0] as JobRow };
    });
  }

  async get(id: string): Promise<JobRow | undefined> {
    return this.knex('generation_jobs').where({ id }).first();
  }

  /**
   * Writes on a job this process holds; false when it holds it no longer (its lease was taken over, or
   * the job is gone with its owner's account).
   */
  async update(
    lease: JobLease,
    fields: Partial<Pick<JobRow, 'error' | 'finished_at' | 'callback_status' | 'callback_attempts' | 'callback_error'> & { status: 'failed' }>,
  ): Promise<boolean> {
    const values: Record<string, unknown> = { ...fields, updated_at: new Date() };
    if (fields.error !== undefined) values.error = fields.error === null ? null : JSON.stringify(fields.error);
    return (await fenced(this.knex, lease).update(values)) > 0;
  }

  /** A job's first run begins; false when the job is gone (its owner's account was deleted meanwhile). */
  async start(lease: JobLease): Promise<boolean> {
    return (await fenced(this.knex, lease).where({ status: 'queued' }).update({ status: 'running', attempts: 1, updated_at: new Date() })) > 0;
  }

  /**
   * Extends the leases of the jobs this process runs. The previous release judged a job by its age
   * (updated_at older than GENERATION_TIMEOUT_MS + 60 s), so updated_at moves with the lease.
   */
  async renewLeases(leases: JobLease[], leaseMs: number): Promise<number> {
    if (leases.length === 0) return 0;
    return this.knex('generation_jobs')
      .whereIn(
        ['id', 'lease_token'],
        leases.map((lease) => [lease.id, lease.token]),
      )
      .update({ lease_until: leaseEnd(this.knex, leaseMs), updated_at: this.knex.fn.now() });
  }

  /**
   * Lets go of jobs this process cannot finish before it stops: their leases lapse now and their tokens
   * change, so another replica takes them over at its next sweep and this process can write nothing more
   * on them.
   */
  async releaseLeases(leases: JobLease[]): Promise<number> {
    if (leases.length === 0) return 0;
    return this.knex('generation_jobs')
      .whereIn(
        ['id', 'lease_token'],
        leases.map((lease) => [lease.id, lease.token]),
      )
      .update({ lease_token: null, lease_until: this.knex.fn.now() });
  }

  /**
   * Takes over up to `limit` jobs whose lease lapsed (their process died, or handed them back), each in one
   * conditional UPDATE, so of replicas sweeping at once exactly one gets each job (the others skip the rows
   * it locked, and find them leased once it commits). A job left by the previous release (no lease) is
   * taken when it has not moved for `legacyMs`. What becomes of each:
   * - not finished, and run fewer than `maxRuns` times: running again under `holder` (attempts + 1);
   * - not finished, and run `maxRuns` times: failed with `interrupted`;
   * - finished with its callback still pending: held by `holder` to deliver it.
   */
  async claimExpired(
    holder: LeaseHolder,
    options: { legacyMs: number; maxRuns: number; limit: number; interrupted: NonNullable<JobRow['error']> },
  ): Promise<JobRow[]> {
    const lapsed = `${UNSETTLED} and (lease_until < now() or (lease_until is null and updated_at < now() - ? * interval '1 millisecond'))`;
    const unfinished = `j.status in ('queued', 'running')`;
    const exhausted = `${unfinished} and greatest(j.attempts, 1) >= ?`;
    const { rows } = await this.knex.raw<{ rows: JobRow[] }>(
      `with due as (
         select id from generation_jobs where ${lapsed} order by updated_at limit ? for update skip locked
       )
       update generation_jobs j set
         owner_instance = ?, lease_token = ?, lease_until = now() + ? * interval '1 millisecond', updated_at = now(),
         attempts = case when ${unfinished} and not (${exhausted}) then greatest(j.attempts, 1) + 1 else j.attempts end,
         status = case when ${exhausted} then 'failed' when ${unfinished} then 'running' else j.status end,
         error = case when ${exhausted} then ?::jsonb else j.error end,
         finished_at = case when ${exhausted} then now() else j.finished_at end
       from due where j.id = due.id
       returning j.*`,
      [
        options.legacyMs,
        options.limit,
        holder.instance,
        holder.token,
        holder.leaseMs,
        options.maxRuns,
        options.maxRuns,
        options.maxRuns,
        JSON.stringify(options.interrupted),
        options.maxRuns,
      ],
    );
    return rows;
  }

  /**
   * The account export: up to `limit` of the owner's jobs past `after` (from the first when undefined),
   * oldest first by the row's creation time, then its id.
   */
  async exportOf(owner: string, after: { at: string; id: string } | undefined, limit: number): Promise<Array<ExportedJob & { position_at: string }>> {
    const query = this.knex('generation_jobs as j')
      .leftJoin('generation_idempotency_keys as k', 'k.job_id', 'j.id')
      .select('j.*', 'k.key as idempotency_key', positionTime(this.knex, 'j.created_at'))
      .where('j.owner', owner)
      .limit(limit);
    return oldestFirst(query, ['j.created_at', 'j.id'], after && [after.at, after.id]);
  }
}
