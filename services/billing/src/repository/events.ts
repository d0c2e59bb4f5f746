import type { Knex } from '@tempora/kit/data';
import type { EventRow } from './rows.ts';

/** Provider messages seen (`billing_events`): each is applied once, whatever its redeliveries. */
export class ProviderEvents {
  private readonly knex: Knex;

  constructor(knex: Knex) {
    this.knex = knex;
  }

  /** Claims a provider message; false when it was recorded before (a redelivery, or a concurrent duplicate once its first copy commits). */
  async claim(provider: string, eventId: string, type: string): Promise<boolean> {
    const rows = await this.knex('billing_events')
      .insert({ provider, event_id: eventId, type })
      .onConflict(['provider', 'event_id'])
      .ignore()
      .returning('event_id');
    return rows.length > 0;
  }

  async settle(provider: string, eventId: string, outcome: string, detail: string | null, userId: string | null): Promise<void> {
    await this.knex('billing_events').where({ provider, event_id: eventId }).update({ outcome, detail, user_id: userId });
  }

  async get(provider: string, eventId: string): Promise<EventRow | undefined> {
    return this.knex<EventRow>('billing_events').where({ provider, event_id: eventId }).first();
  }
}
