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
  created_at: Date;
  updated_at: Date;
  finished_at: Date | null;
}

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

/** All SQL of the generation service. */
export class GenerationRepository {
  readonly knex: Knex;

  constructor(knex: Knex) {
    this.knex = knex;
  }

  /** Stores a scene; false (nothing stored) when its owner's account was deleted while it was generated. */
  async insertTimepoint(record: SceneRecord, image: { data: Buffer; mime_type: string } | null): Promise<boolean> {
    return this.knex.transaction(async (trx) => {
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
    });
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
        })
        .returning('*');
      return { created: true, job: rows[0] as JobRow };
    });
  }

  async job(id: string): Promise<JobRow | undefined> {
    return this.knex('generation_jobs').where({ id }).first();
  }

  /** False when there is no such job (any more: its owner's account was deleted). */
  async updateJob(id: string, fields: Partial<Omit<JobRow, 'id' | 'created_at'>>): Promise<boolean> {
    const values: Record<string, unknown> = { ...fields, updated_at: new Date() };
    if (fields.error !== undefined) values.error = fields.error === null ? null : JSON.stringify(fields.error);
    if (fields.request !== undefined) values.request = JSON.stringify(fields.request);
    return (await this.knex('generation_jobs').where({ id }).update(values)) > 0;
  }

  /** Jobs a previous process left unfinished cannot resume (their pipeline lived in memory). */
  async failInterruptedJobs(olderThan: Date): Promise<number> {
    return this.knex('generation_jobs')
      .whereIn('status', ['queued', 'running'])
      .where('updated_at', '<', olderThan)
      .update({
        status: 'failed',
        error: JSON.stringify({ status: 503, detail: 'the generation service restarted before the job finished; submit it again' }),
        updated_at: new Date(),
        finished_at: new Date(),
      });
  }
}
