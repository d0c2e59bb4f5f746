import type { Knex } from '@tempora/kit/data';
import type { AccountDeletion } from '@tempora/kit/http';

/** What the gateway itself deleted of an account: kind → rows. */
export type GatewayDeletion = Record<string, number>;

export interface DeletionRow {
  user_id: string;
  gateway: GatewayDeletion;
  requested_at: Date;
  completed_at: Date | null;
}

export interface DeletionStepRow {
  user_id: string;
  service: string;
  attempts: number;
  last_error: string | null;
  result: AccountDeletion | null;
  done_at: Date | null;
}

/** The tables an account's gateway rows live in, each with the column naming the user. */
const GATEWAY_TABLES = [
  ['identities', 'identities'],
  ['sessions', 'refresh_tokens'],
  ['api_keys', 'api_keys'],
  ['ledger_entries', 'credit_ledger'],
  ['followed_jobs', 'charged_jobs'],
  ['open_charges', 'open_charges'],
] as const;

/** Durable account deletions: the record, the gateway's own rows, and a step per other service. */
export class DeletionsRepository {
  private readonly knex: Knex;

  constructor(knex: Knex) {
    this.knex = knex;
  }

  /**
   * Records the deletion and removes the gateway's rows of the user in one transaction, so the account is
   * gone here exactly when the other services' steps are due. Returns undefined when the user was already
   * gone and no deletion was recorded for it (nothing to delete).
   */
  async record(userId: string, services: readonly string[]): Promise<DeletionRow | undefined> {
    return this.knex.transaction(async (trx) => {
      const existing = (await trx('account_deletions').where({ user_id: userId }).first()) as DeletionRow | undefined;
      if (existing) return existing;
      const user = await trx('users').where({ id: userId }).forUpdate().first('id');
      if (!user) return undefined;
      const gateway: GatewayDeletion = {};
      for (const [kind, table] of GATEWAY_TABLES) {
        const [{ count }] = (await trx(table).where({ user_id: userId }).count({ count: '*' })) as [{ count: string | number }];
        gateway[kind] = Number(count);
      }
      // The ledger is append-only; the transaction opts in to deleting it with its account.
      await trx.raw(`select set_config('tempora.deleting_account', 'on', true)`);
      await trx('users').where({ id: userId }).delete();
      gateway.users = 1;
      const [row] = (await trx('account_deletions')
        .insert({ user_id: userId, gateway: JSON.stringify(gateway) })
        .returning('*')) as DeletionRow[];
      await trx('account_deletion_steps').insert(services.map((service) => ({ user_id: userId, service })));
      return row!;
    });
  }

  async find(userId: string): Promise<{ deletion: DeletionRow; steps: DeletionStepRow[] } | undefined> {
    const deletion = (await this.knex('account_deletions').where({ user_id: userId }).first()) as DeletionRow | undefined;
    if (!deletion) return undefined;
    const steps = (await this.knex('account_deletion_steps').where({ user_id: userId }).orderBy('service')) as DeletionStepRow[];
    return { deletion, steps };
  }

  /**
   * Claims up to `limit` pending steps that are due (of one user when given), pushing their next try out
   * by `leaseMs` so another replica's sweep leaves them alone meanwhile.
   */
  async claimDue(limit: number, leaseMs: number, userId?: string): Promise<DeletionStepRow[]> {
    return this.knex.transaction(async (trx) => {
      const due = trx('account_deletion_steps')
        .whereNull('done_at')
        .andWhere('try_after', '<=', trx.fn.now())
        .modify((query) => {
          if (userId) void query.andWhere({ user_id: userId });
        })
        .orderBy('try_after')
        .limit(limit)
        .forUpdate()
        .skipLocked()
        .select('user_id', 'service');
      const rows = (await due) as Array<{ user_id: string; service: string }>;
      if (rows.length === 0) return [];
      return (await trx('account_deletion_steps')
        .whereIn(
          ['user_id', 'service'],
          rows.map((row) => [row.user_id, row.service]),
        )
        .update({ try_after: trx.raw(`now() + make_interval(secs => ?)`, [leaseMs / 1000]), attempts: trx.raw('attempts + 1') })
        .returning('*')) as DeletionStepRow[];
    });
  }

  /** The service confirmed its part; the deletion completes with its last step. */
  async complete(userId: string, service: string, result: AccountDeletion): Promise<void> {
    await this.knex.transaction(async (trx) => {
      // Steps of one account complete concurrently: the record's lock makes the last of them see the others.
      await trx('account_deletions').where({ user_id: userId }).forUpdate().first('user_id');
      await trx('account_deletion_steps')
        .where({ user_id: userId, service })
        .update({ result: JSON.stringify(result), done_at: trx.fn.now(), last_error: null });
      const open = await trx('account_deletion_steps').where({ user_id: userId }).whereNull('done_at').first('service');
      if (!open) await trx('account_deletions').where({ user_id: userId }).whereNull('completed_at').update({ completed_at: trx.fn.now() });
    });
  }

  /** The service failed its part; it is tried again after `retryMs`. */
  async postpone(userId: string, service: string, error: string, retryMs: number): Promise<void> {
    await this.knex('account_deletion_steps')
      .where({ user_id: userId, service })
      .whereNull('done_at')
      .update({ last_error: error, try_after: this.knex.raw(`now() + make_interval(secs => ?)`, [retryMs / 1000]) });
  }
}
