import { createHash } from 'node:crypto';
import { claimIdempotencyKey, type IdempotencyKey, type Knex } from '@tempora/kit/data';
import type { SceneRecord } from './scene.ts';
import type { GenerateRequest } from './schemas.ts';

const JOB_KEYS = { table: 'generation_idempotency_keys', column: 'job_id', target: 'generation_jobs' };

/** What submitting a job did: inserted it, or found the job its idempotency key had already submitted. */
export type JobCreation = { created: true; job: JobRow } | { created: false; job: JobRow; fingerprint: string };

export interface JobRow {
  id: string;
  status: 'queued' | 'running' | 'completed' | 'failed';
  owner: string | null;
  request: GenerateRequest;
  timepoint_id: string | null;
  error: { status: number; detail: string; agent?: string | null } | null;
  callback_url: string | null;
  callback_status: 'none' | 'pending' | 'delivered' | 'failed';
  callback_attempts: number;
  callback_error: string | null;
  /** The process holding the job's lease: running it, or delivering its callback. */
  owner_instance: string | null;
  lease_token: string | null;
  lease_until: Date | null;
  /** How many times its pipeline was started (at most twice: once, and once more after a lost process). */
  attempts: number;
  created_at: Date;
  updated_at: Date;
  finished_at: Date | null;
}

/** A process's hold on a job: every write it makes on the job is fenced by the token. */
export interface JobLease {
  id: string;
  token: string;
}

/** Who takes a job and for how long (insertJob, claimExpiredJobs). */
export interface LeaseHolder {
  instance: string;
  token: string;
  leaseMs: number;
}

/** The jobs whose lease lapsed: not finished, or finished with a callback still to deliver. */
const UNSETTLED = `(status in ('queued', 'running') or callback_status = 'pending')`;
const leaseEnd = (knex: Knex, ms: number) => knex.raw(`now() + ? * interval '1 millisecond'`, [ms]);

export interface TimepointRow {
  id: string;
  owner: string | null;
  visibility: 'public' | 'private';
  record: SceneRecord;
  created_at: Date;
  updated_at: Date;
}

/** What an account deletion removed, by kind (the `deleted` of its answer). */
export interface OwnerErasure {
  timepoints: number;
  images: number;
  jobs: number;
  idempotency_keys: number;
}

/** A job as the account export lists it: with the request as sent and the Idempotency-Key it came with. */
export type ExportedJob = JobRow & { idempotency_key: string | null };

const ownerHash = (owner: string) => createHash('sha256').update(owner).digest('hex');

/**
 * Serialises, per owner, storing a scene with erasing the owner (both in a transaction): either the scene
 * is stored first and the erasure deletes it, or the erasure comes first and the scene is refused.
 */
const lockOwner = (trx: Knex.Transaction, owner: string) => trx.raw('select pg_advisory_xact_lock(hashtext(?))', [`generation-owner:${owner}`]);

/** The job, only while `lease` still holds it: a process that lost its job writes nothing on it. */
const fenced = (knex: Knex, lease: JobLease) => knex('generation_jobs').where({ id: lease.id, lease_token: lease.token });

/** Rolls back a scene whose job is no longer this process's (insertTimepoint). */
class LeaseLost extends Error {}

/** All SQL of the generation service. */
export class GenerationRepository {
  readonly knex: Knex;

  constructor(knex: Knex) {
    this.knex = knex;
  }

  /**
   * Stores a scene; false (nothing stored) when its owner's account was deleted while it was generated, or,
   * for a `job`'s scene, when that job is no longer this process's (its lease was taken over, or it is
   * gone). The job is marked completed in the same transaction, so a job completes once, with one scene.
   */
  async insertTimepoint(record: SceneRecord, image: { data: Buffer; mime_type: string } | null, job?: JobLease): Promise<boolean> {
    return this.knex
      .transaction(async (trx) => {
        if (!(await this.storeTimepoint(trx, record, image))) return false;
        if (job && !(await fenced(trx, job).update({ status: 'completed', timepoint_id: record.id, finished_at: trx.fn.now(), updated_at: trx.fn.now() })))
          throw new LeaseLost();
        return true;
      })
      .catch((error: unknown) => {
        if (error instanceof LeaseLost) return false;
        throw error;
      });
  }

  private async storeTimepoint(trx: Knex.Transaction, record: SceneRecord, image: { data: Buffer; mime_type: string } | null): Promise<boolean> {
    if (record.owner !== null) {
      await lockOwner(trx, record.owner);
      if (
        await trx('generation_erasures')
          .where({ owner_hash: ownerHash(record.owner) })
          .andWhere('until', '>', trx.fn.now())
          .first()
      )
        return false;
    }
    await trx('timepoints').insert({
      id: record.id,
      slug: record.slug,
      query: record.query,
      status: record.status,
      owner: record.owner,
      visibility: record.visibility,
      preset: record.preset,
      year: record.year,
      path: record.path,
      record: JSON.stringify(record),
      created_at: record.created_at,
      updated_at: record.created_at,
    });
    if (image) await trx('timepoint_images').insert({ timepoint_id: record.id, mime_type: image.mime_type, data: image.data });
    return true;
  }

  async timepoint(id: string): Promise<TimepointRow | undefined> {
    return this.knex('timepoints').select('id', 'owner', 'visibility', 'record', 'created_at', 'updated_at').where({ id }).first();
  }

  async image(id: string): Promise<{ mime_type: string; data: Buffer } | undefined> {
    const row = (await this.knex('timepoint_images').select('mime_type', 'data').where({ timepoint_id: id }).first()) as
      | { mime_type: string; data: Uint8Array }
      | undefined;
    // pg reads bytea as a Buffer, the embedded database as a plain Uint8Array, which Koa would send as JSON.
    return (
      row && { mime_type: row.mime_type, data: Buffer.isBuffer(row.data) ? row.data : Buffer.from(row.data.buffer, row.data.byteOffset, row.data.byteLength) }
    );
  }

  async listByOwner(owner: string, limit: number, offset: number): Promise<{ items: TimepointRow[]; total: number }> {
    const [items, count] = await Promise.all([
      this.knex('timepoints')
        .select('id', 'owner', 'visibility', 'record', 'created_at', 'updated_at')
        .where({ owner })
        .orderBy([
          { column: 'created_at', order: 'desc' },
          { column: 'id', order: 'desc' },
        ])
        .limit(limit)
        .offset(offset),
      this.knex('timepoints').where({ owner }).count<{ count: string }[]>({ count: '*' }),
    ]);
    return { items, total: Number(count[0]?.count ?? 0) };
  }

  async setVisibility(id: string, visibility: 'public' | 'private'): Promise<TimepointRow | undefined> {
    const now = new Date();
    const rows = await this.knex('timepoints')
      .where({ id })
      .update({
        visibility,
        updated_at: now,
        record: this.knex.raw(`jsonb_set(jsonb_set(record, '{visibility}', to_jsonb(?::text)), '{updated_at}', to_jsonb(?::text))`, [
          visibility,
          now.toISOString(),
        ]),
      })
      .returning(['id', 'owner', 'visibility', 'record', 'created_at', 'updated_at']);
    return rows[0];
  }

  async deleteTimepoint(id: string): Promise<boolean> {
    return (await this.knex('timepoints').where({ id }).delete()) > 0;
  }

  /**
   * Account deletion: every scene (with its image), job and idempotency key of the user, and, for `holdMs`,
   * the marker by which insertTimepoint refuses a scene of the user that was still being generated.
   * Lapsed markers of other users go in the same transaction, so the table holds live ones only.
   */
  async eraseOwner(owner: string, holdMs: number): Promise<OwnerErasure> {
    return this.knex.transaction(async (trx) => {
      await lockOwner(trx, owner);
      await trx('generation_erasures').where('until', '<=', trx.fn.now()).delete();
      await trx('generation_erasures')
        .insert({ owner_hash: ownerHash(owner), until: trx.raw(`now() + ? * interval '1 millisecond'`, [holdMs]) })
        .onConflict('owner_hash')
        .merge();
      const idempotencyKeys = Number(await trx('generation_idempotency_keys').where({ owner }).delete());
      const jobs = Number(await trx('generation_jobs').where({ owner }).delete());
      const images = Number(await trx('timepoint_images').whereIn('timepoint_id', trx('timepoints').select('id').where({ owner })).delete());
      const timepoints = Number(await trx('timepoints').where({ owner }).delete());
      return { timepoints, images, jobs, idempotency_keys: idempotencyKeys };
    });
  }

  /** The account export: up to `limit` of the owner's scene records with ids after `after` (all when ''), by id. */
  async exportTimepoints(owner: string, after: string, limit: number): Promise<Array<Pick<SceneRecord, 'id'> & Record<string, unknown>>> {
    const query = this.knex('timepoints').select('record').where({ owner }).orderBy('id').limit(limit);
    if (after) query.andWhere('id', '>', after);
    return ((await query) as Array<{ record: Pick<SceneRecord, 'id'> & Record<string, unknown> }>).map((row) => row.record);
  }

  /** The account export: up to `limit` of the owner's jobs with ids after `after` (all when ''), by id. */
  async exportJobs(owner: string, after: string, limit: number): Promise<ExportedJob[]> {
    const query = this.knex('generation_jobs as j')
      .leftJoin('generation_idempotency_keys as k', 'k.job_id', 'j.id')
      .select('j.*', 'k.key as idempotency_key')
      .where('j.owner', owner)
      .orderBy('j.id')
      .limit(limit);
    if (after) query.andWhere('j.id', '>', after);
    return query;
  }

  /**
   * Inserts a job. With `idempotency`, its key is claimed first, in the same transaction
   * (claimIdempotencyKey): of concurrent requests with one key, one inserts the job and the rest find it.
   */
  async insertJob(
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

  async job(id: string): Promise<JobRow | undefined> {
    return this.knex('generation_jobs').where({ id }).first();
  }

  /**
   * Writes on a job this process holds; false when it holds it no longer (its lease was taken over, or
   * the job is gone with its owner's account).
   */
  async updateJob(
    lease: JobLease,
    fields: Partial<Pick<JobRow, 'error' | 'finished_at' | 'callback_status' | 'callback_attempts' | 'callback_error'> & { status: 'failed' }>,
  ): Promise<boolean> {
    const values: Record<string, unknown> = { ...fields, updated_at: new Date() };
    if (fields.error !== undefined) values.error = fields.error === null ? null : JSON.stringify(fields.error);
    return (await fenced(this.knex, lease).update(values)) > 0;
  }

  /** A job's first run begins; false when the job is gone (its owner's account was deleted meanwhile). */
  async startJob(lease: JobLease): Promise<boolean> {
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
  async claimExpiredJobs(
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
}
