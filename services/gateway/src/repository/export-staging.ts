import type { Knex } from '@tempora/kit/data';

/** One exported item as it is staged: where it sorts (accounts/export-order.ts) and its JSON as the service sent it. */
export interface StagedItem {
  /** An ISO 8601 date-time, or `-infinity` for an item that names none. */
  created: string;
  id: string;
  json: string;
}

/** Where a read of the staged items stopped: the last item's sort key, as PostgreSQL wrote it. */
export interface StagedPosition {
  created: string;
  id: string;
  seq: number;
}

/** The export's account was deleted while it ran: its staged rows went with it, and no more can be staged. */
export class ExportAccountGone extends Error {
  override name = 'ExportAccountGone';
}

const isForeignKeyViolation = (error: unknown) => (error as { code?: string }).code === '23503';

/** Staged rows of an export that never finished (the gateway stopped midway) go after this long. */
const STALE_AFTER = '1 day';

/**
 * The kind of a service's export being put in order (docs/accounts.md, "Export"): its items are staged in
 * PostgreSQL as they arrive and read back sorted, a page at a time, so no kind is held whole in memory.
 */
export class ExportStaging {
  private readonly knex: Knex;
  constructor(knex: Knex) {
    this.knex = knex;
  }

  /** Stages `items` of the export, numbered from `seq` (the order they arrived in, the last tie-break). */
  async stage(exportId: string, userId: string, seq: number, items: readonly StagedItem[]): Promise<void> {
    if (items.length === 0) return;
    try {
      await this.knex('export_staging').insert(
        items.map((item, index) => ({
          export_id: exportId,
          seq: seq + index,
          user_id: userId,
          created: item.created,
          item_id: item.id,
          item: item.json,
        })),
      );
    } catch (error) {
      if (isForeignKeyViolation(error)) throw new ExportAccountGone();
      throw error;
    }
  }

  /** Up to `limit` staged items after `after`, by creation time, then id, then arrival. */
  async sorted(exportId: string, after: StagedPosition | undefined, limit: number): Promise<{ items: string[]; last?: StagedPosition }> {
    const query = this.knex('export_staging')
      .where({ export_id: exportId })
      // The position is read back as text: a JavaScript Date would lose PostgreSQL's microseconds.
      .select(this.knex.raw('created::text as created'), 'item_id', 'seq', 'item')
      .orderBy([{ column: 'created' }, { column: 'item_id' }, { column: 'seq' }])
      .limit(limit);
    if (after) query.whereRaw('(created, item_id, seq) > (?::timestamptz, ?, ?)', [after.created, after.id, after.seq]);
    const rows = (await query) as { created: string; item_id: string; seq: number; item: string }[];
    const last = rows.at(-1);
    return { items: rows.map((row) => row.item), ...(last ? { last: { created: last.created, id: last.item_id, seq: last.seq } } : {}) };
  }

  async clear(exportId: string): Promise<void> {
    await this.knex('export_staging').where({ export_id: exportId }).delete();
  }

  /** Drops what exports that never finished left behind. */
  async sweep(): Promise<void> {
    await this.knex('export_staging').whereRaw(`staged_at < now() - interval '${STALE_AFTER}'`).delete();
  }
}
