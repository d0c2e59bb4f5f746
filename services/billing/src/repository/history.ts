import { type Knex, oldestFirst, positionTime } from '@tempora/kit/data';
import type { HistoryRow, NewHistoryEntry } from './rows.ts';

/** What a user sees of their billing (`billing_history`): purchases, renewals, refunds, tier changes, debt. */
export class History {
  private readonly knex: Knex;

  constructor(knex: Knex) {
    this.knex = knex;
  }

  async add(entry: NewHistoryEntry): Promise<void> {
    await this.knex('billing_history').insert(entry);
  }

  /** A page of a user's history, newest first, and how long it is. */
  async page(userId: string, limit: number, offset: number): Promise<{ items: HistoryRow[]; total: number }> {
    const base = this.knex<HistoryRow>('billing_history').where({ user_id: userId });
    const [items, [count]] = await Promise.all([
      base.clone().orderBy('id', 'desc').limit(limit).offset(offset),
      base.clone().count<{ count: string }[]>('* as count'),
    ]);
    return { items: items as HistoryRow[], total: Number(count?.count ?? 0) };
  }

  /**
   * Up to `limit` of a user's history past `after`, oldest first, then by id (an export's keyset pages),
   * each entry with its creation time as the kit's positionTime selects it.
   */
  async after(userId: string, after: { at: string; id: string } | undefined, limit: number): Promise<Array<HistoryRow & { position_at: string }>> {
    const query = this.knex('billing_history').select('*', positionTime(this.knex, 'created_at')).where({ user_id: userId }).limit(limit);
    return oldestFirst(query, ['created_at', 'id'], after && [after.at, after.id]);
  }
}
