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

/** All SQL of the generation service. */
export class GenerationRepository {
  readonly knex: Knex;

  constructor(knex: Knex) {
    this.knex = knex;
  }

  async insertTimepoint(record: SceneRecord, image: { data: Buffer; mime_type: string } | null): Promise<void> {
    await this.knex.transaction(async (trx) => {
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
    });
  }

  async timepoint(id: string): Promise<TimepointRow | undefined> {
    return this.knex('timepoints').select('id', 'owner', 'visibility', 'record', 'created_at', 'updated_at').where({ id }).first();
  }

  async image(id: string): Promise<{ mime_type: string; data: Buffer } | undefined> {
    const row = (await this.knex('timepoint_images').select('mime_type', 'data').where({ timepoint_id: id }).first()) as { mime_type: string; data: Uint8Array } | undefined;
    // pg reads bytea as a Buffer, the embedded database as a plain Uint8Array, which Koa would send as JSON.
    return row && { mime_type: row.mime_type, data: Buffer.isBuffer(row.data) ? row.data : Buffer.from(row.data.buffer, row.data.byteOffset, row.data.byteLength) };
  }

  async listByOwner(owner: string, limit: number, offset: number): Promise<{ items: TimepointRow[]; total: number }> {
    const [items, count] = await Promise.all([
      this.knex('timepoints').select('id', 'owner', 'visibility', 'record', 'created_at', 'updated_at').where({ owner }).orderBy([{ column: 'created_at', order: 'desc' }, { column: 'id', order: 'desc' }]).limit(limit).offset(offset),
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
        record: this.knex.raw(`jsonb_set(jsonb_set(record, '{visibility}', to_jsonb(?::text)), '{updated_at}', to_jsonb(?::text))`, [visibility, now.toISOString()]),
      })
      .returning(['id', 'owner', 'visibility', 'record', 'created_at', 'updated_at']);
    return rows[0];
  }

  async deleteTimepoint(id: string): Promise<boolean> {
    return (await this.knex('timepoints').where({ id }).delete()) > 0;
  }

  /** Account deletion: every scene and job of the user. Returns how many scenes went. */
  async deleteOwner(owner: string): Promise<number> {
    return this.knex.transaction(async (trx) => {
      await trx('generation_jobs').where({ owner }).delete();
      return Number(await trx('timepoints').where({ owner }).delete());
    });
  }

  /**
   * Inserts a job. With `idempotency`, its key is claimed first, in the same transaction
   * (claimIdempotencyKey): of concurrent requests with one key, one inserts the job and the rest find it.
   */
  async insertJob(job: { id: string; owner: string | null; request: GenerateRequest; callback_url: string | null }, idempotency?: IdempotencyKey): Promise<JobCreation> {
    return this.knex.transaction(async (trx): Promise<JobCreation> => {
      const earlier = idempotency && (await claimIdempotencyKey<JobRow>(trx, JOB_KEYS, idempotency, job.id));
      if (earlier) return { created: false, job: earlier.row, fingerprint: earlier.fingerprint };
      const rows = await trx('generation_jobs')
        .insert({ id: job.id, owner: job.owner, request: JSON.stringify(job.request), callback_url: job.callback_url, callback_status: job.callback_url ? 'pending' : 'none' })
        .returning('*');
      return { created: true, job: rows[0] as JobRow };
    });
  }

  async job(id: string): Promise<JobRow | undefined> {
    return this.knex('generation_jobs').where({ id }).first();
  }

  async updateJob(id: string, fields: Partial<Omit<JobRow, 'id' | 'created_at'>>): Promise<void> {
    const values: Record<string, unknown> = { ...fields, updated_at: new Date() };
    if (fields.error !== undefined) values.error = fields.error === null ? null : JSON.stringify(fields.error);
    if (fields.request !== undefined) values.request = JSON.stringify(fields.request);
    await this.knex('generation_jobs').where({ id }).update(values);
  }

  /** Jobs a previous process left unfinished cannot resume (their pipeline lived in memory). */
  async failInterruptedJobs(olderThan: Date): Promise<number> {
    return this.knex('generation_jobs')
      .whereIn('status', ['queued', 'running'])
      .where('updated_at', '<', olderThan)
      .update({ status: 'failed', error: JSON.stringify({ status: 503, detail: 'the generation service restarted before the job finished; submit it again' }), updated_at: new Date(), finished_at: new Date() });
  }
}
