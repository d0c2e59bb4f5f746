import { type Knex, oldestFirst, positionTime } from '@tempora/kit/data';
import type { Provider } from '../domain/intents.ts';
import type { ProviderRef, SubscriptionRow } from './rows.ts';

/** Subscriptions (`billing_subscriptions`): each plan's latest state as its provider reported it. */
export class Subscriptions {
  private readonly knex: Knex;

  constructor(knex: Knex) {
    this.knex = knex;
  }

  /** The subscription row, locked; `created` when this call inserted it (with the given first state). */
  async lock(
    provider: Provider,
    ref: string,
    initial: Omit<SubscriptionRow, 'provider' | 'ref' | 'created_at' | 'updated_at'>,
  ): Promise<{ row: SubscriptionRow; created: boolean }> {
    const existing = await this.knex<SubscriptionRow>('billing_subscriptions').where({ provider, ref }).forUpdate().first();
    if (existing) return { row: existing, created: false };
    const [inserted] = await this.knex<SubscriptionRow>('billing_subscriptions')
      .insert({ provider, ref, ...initial })
      .onConflict(['provider', 'ref'])
      .ignore()
      .returning('*');
    if (inserted) return { row: inserted, created: true };
    return { row: (await this.knex<SubscriptionRow>('billing_subscriptions').where({ provider, ref }).forUpdate().first())!, created: false };
  }

  async update(provider: string, ref: string, fields: Partial<Omit<SubscriptionRow, 'provider' | 'ref'>>): Promise<void> {
    await this.knex('billing_subscriptions')
      .where({ provider, ref })
      .update({ ...fields, updated_at: this.knex.fn.now() });
  }

  async get(provider: Provider, ref: string): Promise<SubscriptionRow | undefined> {
    return this.knex<SubscriptionRow>('billing_subscriptions').where({ provider, ref }).first();
  }

  /** A user's subscriptions, oldest first. */
  async of(userId: string): Promise<SubscriptionRow[]> {
    return this.knex<SubscriptionRow>('billing_subscriptions').where({ user_id: userId }).orderBy('created_at');
  }

  /** Users with a past-due subscription: their tier may lapse with time alone. */
  async usersPastDue(): Promise<string[]> {
    const rows = await this.knex('billing_subscriptions').where({ status: 'past_due' }).whereNotNull('user_id').distinct('user_id');
    return rows.map((row: { user_id: string }) => row.user_id);
  }

  /**
   * Up to `limit` of a user's subscriptions past `after`, oldest first, then by provider and ref byte by byte
   * (an export's keyset pages), each with its creation time as the kit's positionTime selects it.
   */
  async after(userId: string, after: (ProviderRef & { at: string }) | undefined, limit: number): Promise<Array<SubscriptionRow & { position_at: string }>> {
    const query = this.knex('billing_subscriptions').select('*', positionTime(this.knex, 'created_at')).where({ user_id: userId }).limit(limit);
    // Collation "C": the order of the bytes, whatever the database's locale would make of case and punctuation.
    const order = ['created_at', 'provider collate "C"', 'ref collate "C"'];
    return oldestFirst(query, order, after && [after.at, after.provider, after.ref]);
  }
}
