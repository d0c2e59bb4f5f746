import type { Knex } from '@tempora/kit/data';
import { erasureDigest } from '../domain/erasure.ts';

/**
 * Serialises what is done for these users with their account's deletion, until the transaction ends.
 * Taken before any row lock (the book takes it for the users a message names, the deletion for its
 * user), so the two wait for each other instead of deadlocking.
 */
async function lockUsers(db: Knex, userIds: string[]): Promise<void> {
  for (const userId of [...new Set(userIds)].sort()) await db.raw('select pg_advisory_xact_lock(hashtextextended(?, 0))', [`billing-user:${userId}`]);
}

/** Deleted accounts (`billing_erasures`, by digest) and the deletion itself, which reaches every table. */
export class Erasures {
  private readonly knex: Knex;

  constructor(knex: Knex) {
    this.knex = knex;
  }

  /** See `lockUsers`: for a transaction that applies what a message says about these users. */
  async lockUsers(userIds: string[]): Promise<void> {
    await lockUsers(this.knex, userIds);
  }

  async anyErased(userIds: string[]): Promise<boolean> {
    if (userIds.length === 0) return false;
    const row = await this.knex('billing_erasures').whereIn('digest', userIds.map(erasureDigest)).first('digest');
    return row !== undefined;
  }

  /** Marks an account deleted: from its commit, a message naming the user is settled without effect. */
  async markErased(userId: string): Promise<void> {
    await this.knex.transaction(async (trx) => {
      await lockUsers(trx, [userId]);
      await trx('billing_erasures')
        .insert({ digest: erasureDigest(userId) })
        .onConflict('digest')
        .ignore();
    });
  }

  /**
   * Deletes what billing holds of a user, in one transaction: payments are kept without the link to
   * the user (the law keeps them), everything else keyed by the user goes, and the user's digest is
   * remembered with `notes` (added to those of an earlier call). Rows are locked in the book's order
   * (subscriptions, payments, accounts) so a message being applied meanwhile finishes first, and is
   * deleted with the rest. Counts are this call's: a repeated call answers zeros and the notes.
   */
  async erase(userId: string, notes: string[]): Promise<{ counts: Record<string, number>; anonymised: number; notes: string[] }> {
    return this.knex.transaction(async (trx) => {
      await lockUsers(trx, [userId]);
      const digest = erasureDigest(userId);
      const earlier: { notes: string[] } | undefined = await trx('billing_erasures').where({ digest }).forUpdate().first('notes');
      const all = [...new Set([...(earlier?.notes ?? []), ...notes])];
      await trx('billing_erasures')
        .insert({ digest, notes: JSON.stringify(all) })
        .onConflict('digest')
        .merge({ notes: JSON.stringify(all) });
      const subscriptions = await trx('billing_subscriptions').where({ user_id: userId }).delete();
      const anonymised = await trx('billing_payments').where({ user_id: userId }).update({ user_id: null, updated_at: trx.fn.now() });
      const accounts = await trx('billing_accounts').where({ user_id: userId }).delete();
      const outbox = await trx('billing_outbox').where({ user_id: userId }).delete();
      const history = await trx('billing_history').where({ user_id: userId }).delete();
      const events = await trx('billing_events').where({ user_id: userId }).delete();
      return { counts: { subscriptions, accounts, outbox, history, events }, anonymised, notes: all };
    });
  }
}
