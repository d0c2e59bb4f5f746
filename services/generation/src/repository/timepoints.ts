import { type Knex, oldestFirst, positionTime } from '@tempora/kit/data';
import type { SceneRecord } from '../scene.ts';
import { erased } from './erasures.ts';
import { fenced } from './jobs.ts';
import type { JobLease, TimepointRow } from './rows.ts';

/** A scene record as the account export reads it: stored unchanged, with its row's id and position. */
type ExportedTimepoint = { id: string; record: Record<string, unknown>; position_at: string };

/** Rolls back a scene whose job is no longer this process's (Timepoints.insert). */
class LeaseLost extends Error {}

/** The stored scenes and their images. */
export class Timepoints {
  private readonly knex: Knex;

  constructor(knex: Knex) {
    this.knex = knex;
  }

  /**
   * Stores a scene; false (nothing stored) when its owner's account was deleted while it was generated, or,
   * for a `job`'s scene, when that job is no longer this process's (its lease was taken over, or it is
   * gone). The job is marked completed in the same transaction, so a job completes once, with one scene.
   */
  async insert(record: SceneRecord, image: { data: Buffer; mime_type: string } | null, job?: JobLease): Promise<boolean> {
    return this.knex
      .transaction(async (trx) => {
        if (!(await this.store(trx, record, image))) return false;
        if (job && !(await fenced(trx, job).update({ status: 'completed', timepoint_id: record.id, finished_at: trx.fn.now(), updated_at: trx.fn.now() })))
          throw new LeaseLost();
        return true;
      })
      .catch((error: unknown) => {
        if (error instanceof LeaseLost) return false;
        throw error;
      });
  }

  private async store(trx: Knex.Transaction, record: SceneRecord, image: { data: Buffer; mime_type: string } | null): Promise<boolean> {
    if (record.owner !== null && (await erased(trx, record.owner))) return false;
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

  async get(id: string): Promise<TimepointRow | undefined> {
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

  async delete(id: string): Promise<boolean> {
    return (await this.knex('timepoints').where({ id }).delete()) > 0;
  }

  /**
   * The account export: up to `limit` of the owner's scene records past `after` (from the first when
   * undefined), oldest first by the row's creation time, then its id.
   */
  async exportOf(owner: string, after: { at: string; id: string } | undefined, limit: number): Promise<ExportedTimepoint[]> {
    const query = this.knex('timepoints').select('id', 'record', positionTime(this.knex, 'created_at')).where({ owner }).limit(limit);
    return oldestFirst(query, ['created_at', 'id'], after && [after.at, after.id]);
  }
}
