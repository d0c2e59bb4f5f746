import type { Knex } from '@tempora/kit/data';
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

  /** A user's history after the entry `afterId` (oldest first), `limit` of it. */
  async after(userId: string, afterId: string | null, limit: number): Promise<HistoryRow[]> {
    const query = this.knex<HistoryRow>('billing_history').where({ user_id: userId }).orderBy('id').limit(limit);
    if (afterId !== null) query.where('id', '>', afterId);
    return query;
  }
}
