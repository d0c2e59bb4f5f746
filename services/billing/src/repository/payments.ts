import { type Knex, oldestFirst, positionTime } from '@tempora/kit/data';
import type { Provider } from '../domain/intents.ts';
import type { PaymentRow, ProviderRef } from './rows.ts';

/** Payments (`billing_payments`): what was paid, granted, refunded and disputed, one row per provider payment. */
export class Payments {
  private readonly knex: Knex;

  constructor(knex: Knex) {
    this.knex = knex;
  }

  /** The payment row, locked for the transaction; created (empty) when it did not exist. */
  async lock(provider: Provider, ref: string, paymentIntent: string | null): Promise<PaymentRow> {
    await this.knex('billing_payments').insert({ provider, ref, payment_intent: paymentIntent }).onConflict(['provider', 'ref']).ignore();
    return (await this.knex<PaymentRow>('billing_payments').where({ provider, ref }).forUpdate().first())!;
  }

  async byIntent(paymentIntent: string): Promise<PaymentRow | undefined> {
    return this.knex<PaymentRow>('billing_payments').where({ payment_intent: paymentIntent }).first();
  }

  async update(provider: string, ref: string, fields: Partial<Omit<PaymentRow, 'provider' | 'ref'>>): Promise<void> {
    await this.knex('billing_payments')
      .where({ provider, ref })
      .update({ ...fields, updated_at: this.knex.fn.now() });
  }

  /** A user's latest payments, newest first. */
  async latestOf(userId: string, limit: number): Promise<PaymentRow[]> {
    return this.knex<PaymentRow>('billing_payments').where({ user_id: userId }).orderBy('created_at', 'desc').limit(limit);
  }

  /**
   * Up to `limit` of a user's payments past `after`, oldest first, then by provider and ref byte by byte
   * (an export's keyset pages), each with its creation time as the kit's positionTime selects it.
   */
  async after(userId: string, after: (ProviderRef & { at: string }) | undefined, limit: number): Promise<Array<PaymentRow & { position_at: string }>> {
    const query = this.knex('billing_payments').select('*', positionTime(this.knex, 'created_at')).where({ user_id: userId }).limit(limit);
    // Collation "C": the order of the bytes, whatever the database's locale would make of case and punctuation.
    const order = ['created_at', 'provider collate "C"', 'ref collate "C"'];
    return oldestFirst(query, order, after && [after.at, after.provider, after.ref]);
  }
}
