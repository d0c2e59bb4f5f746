// Over 400 lines: users, identities, tokens, keys and the ledger; issue 30 splits it by area like
// graph's repository/ (the account deletions already live in accounts/deletions-repository.ts).
import { randomUUID } from 'node:crypto';
import type { Knex } from '@tempora/kit/data';
import type { Tier } from './domain/limits.ts';

export interface UserRow {
  id: string;
  email: string | null;
  name: string | null;
  tier: Tier;
  is_demo: boolean;
  balance: string | number;
  tokens_valid_after: Date | null;
  created_at: Date;
  updated_at: Date;
}

export interface IdentityRow {
  provider: string;
  subject: string;
  user_id: string;
  email: string | null;
  created_at: Date;
}

export interface RefreshTokenRow {
  id: string;
  family_id: string;
  user_id: string;
  token_hash: string;
  created_at: Date;
  expires_at: Date;
  rotated_at: Date | null;
  revoked_at: Date | null;
  revoked_reason: string | null;
}

export interface ApiKeyRow {
  id: string;
  user_id: string;
  name: string;
  prefix: string;
  key_hash: string;
  scopes: string[];
  created_at: Date;
  last_used_at: Date | null;
  revoked_at: Date | null;
}

export interface LedgerRow {
  id: string;
  user_id: string;
  amount: string | number;
  balance_after: string | number;
  kind: 'signup_grant' | 'grant' | 'charge' | 'refund';
  operation: string | null;
  idempotency_key: string;
  refund_of: string | null;
  metadata: Record<string, unknown>;
  created_at: Date;
}

export class InsufficientCredits extends Error {
  readonly required: number;
  readonly available: number;
  constructor(required: number, available: number) {
    super(`insufficient credits: ${required} required, ${available} available`);
    this.required = required;
    this.available = available;
  }
}
export class UnknownUser extends Error {}
export class IdempotencyConflict extends Error {}

const isUniqueViolation = (error: unknown) => (error as { code?: string }).code === '23505';

export interface LedgerOutcome {
  entry: LedgerRow;
  balance: number;
  /** True when the idempotency key had been used: nothing new was written. */
  replayed: boolean;
}

export interface NewIdentity {
  provider: string;
  subject: string;
  email?: string | null | undefined;
  name?: string | null | undefined;
  isDemo?: boolean;
  tier?: Tier;
  signupCredits: number;
}

/**
 * Every SQL statement of the gateway, in sections by area. One class, a little over 400 lines, because
 * statements of one transaction cross areas (a refund closes its open charge, an account's deletion
 * takes its ledger with it) and the callers hold one repository.
 */
export class GatewayRepository {
  readonly knex: Knex;
  constructor(knex: Knex) {
    this.knex = knex;
  }

  // ---------------------------------------------------------------- users

  async findUser(id: string): Promise<UserRow | undefined> {
    return this.knex<UserRow>('users').where({ id }).first();
  }

  /** The user behind an access token, and whether that token was revoked, in one round trip. */
  async userForToken(id: string, jti: string): Promise<{ user: UserRow; revoked: boolean } | undefined> {
    const row = await this.knex('users')
      .select('users.*', this.knex.raw('exists (select 1 from revoked_access_tokens r where r.jti = ?) as revoked', [jti]))
      .where('users.id', id)
      .first();
    if (!row) return undefined;
    const { revoked, ...user } = row as UserRow & { revoked: boolean };
    return { user, revoked };
  }

  async identitiesOf(userId: string): Promise<IdentityRow[]> {
    return this.knex<IdentityRow>('identities').where({ user_id: userId }).orderBy('created_at');
  }

  /**
   * Finds the user holding (provider, subject) or creates one with its signup grant, atomically: of two
   * concurrent first sign-ins exactly one creates the user, the other finds it.
   */
  async findOrCreateByIdentity(identity: NewIdentity): Promise<{ user: UserRow; created: boolean }> {
    for (let attempt = 0; attempt < 3; attempt += 1) {
      const existing = await this.knex('identities')
        .join('users', 'users.id', 'identities.user_id')
        .where({ 'identities.provider': identity.provider, 'identities.subject': identity.subject })
        .first('users.*');
      if (existing) return { user: existing as UserRow, created: false };
      const created = await this.knex
        .transaction(async (trx) => {
          const id = randomUUID();
          const [user] = await trx<UserRow>('users')
            .insert({ id, email: identity.email ?? null, name: identity.name ?? null, is_demo: identity.isDemo ?? false, tier: identity.tier ?? 'free' })
            .returning('*');
          const claimed = await trx('identities')
            .insert({ provider: identity.provider, subject: identity.subject, user_id: id, email: identity.email ?? null })
            .onConflict(['provider', 'subject'])
            .ignore()
            .returning('user_id');
          if (claimed.length === 0) {
            await trx.rollback(new LostRace());
            return undefined;
          }
          if (identity.signupCredits > 0) {
            await this.applyGrant(trx, id, identity.signupCredits, 'signup_grant', `signup:${id}`, 'signup', {});
          }
          return (await trx<UserRow>('users').where({ id }).first()) ?? user;
        })
        .catch((error: unknown) => {
          if (error instanceof LostRace) return undefined;
          throw error;
        });
      if (created) return { user: created, created: true };
    }
    throw new Error('could not resolve the identity after three attempts');
  }

  /**
   * Links (provider, subject) to the user. `taken` when another account holds it: accounts are never
   * merged silently. Serialised with unlinking on the user's row.
   */
  async linkIdentity(
    userId: string,
    identity: { provider: string; subject: string; email: string | null },
  ): Promise<{ outcome: 'linked' | 'already' | 'taken'; identity?: IdentityRow }> {
    return this.knex.transaction(async (trx) => {
      await trx('users').where({ id: userId }).forUpdate().first('id');
      const [inserted] = (await trx('identities')
        .insert({ provider: identity.provider, subject: identity.subject, user_id: userId, email: identity.email })
        .onConflict(['provider', 'subject'])
        .ignore()
        .returning('*')) as IdentityRow[];
      if (inserted) return { outcome: 'linked', identity: inserted };
      const holder = (await trx<IdentityRow>('identities').where({ provider: identity.provider, subject: identity.subject }).first())!;
      return holder.user_id === userId ? { outcome: 'already', identity: holder } : { outcome: 'taken' };
    });
  }

  /** Unlinks one of the user's identities unless it is the last way to sign in to the account. */
  async unlinkIdentity(userId: string, provider: string, subject: string): Promise<'removed' | 'missing' | 'last'> {
    return this.knex.transaction(async (trx) => {
      await trx('users').where({ id: userId }).forUpdate().first('id');
      const identities = (await trx<IdentityRow>('identities').where({ user_id: userId })) as IdentityRow[];
      if (!identities.some((identity) => identity.provider === provider && identity.subject === subject)) return 'missing';
      if (identities.length === 1) return 'last';
      await trx('identities').where({ user_id: userId, provider, subject }).delete();
      return 'removed';
    });
  }

  async setTier(id: string, tier: Tier): Promise<void> {
    await this.knex('users').where({ id }).update({ tier, updated_at: this.knex.fn.now() });
  }

  // ---------------------------------------------------------------- refresh tokens and revocation

  async insertRefreshToken(
    row: { id: string; family_id: string; user_id: string; token_hash: string; expires_at: Date },
    trx: Knex = this.knex,
  ): Promise<void> {
    await trx('refresh_tokens').insert(row);
  }

  /** Runs `work` with the refresh token row locked (or undefined when the hash is unknown). */
  async withRefreshToken<T>(hash: string, work: (trx: Knex.Transaction, row: RefreshTokenRow | undefined) => Promise<T>): Promise<T> {
    return this.knex.transaction(async (trx) => {
      const row = await trx<RefreshTokenRow>('refresh_tokens').where({ token_hash: hash }).forUpdate().first();
      return work(trx, row);
    });
  }

  async markRotated(trx: Knex, id: string): Promise<void> {
    await trx('refresh_tokens').where({ id }).update({ rotated_at: trx.fn.now() });
  }

  async revokeFamily(familyId: string, reason: string, trx: Knex = this.knex): Promise<number> {
    return trx('refresh_tokens').where({ family_id: familyId }).whereNull('revoked_at').update({ revoked_at: trx.fn.now(), revoked_reason: reason });
  }

  async revokeAllSessions(userId: string, reason: string): Promise<void> {
    await this.knex.transaction(async (trx) => {
      await trx('refresh_tokens').where({ user_id: userId }).whereNull('revoked_at').update({ revoked_at: trx.fn.now(), revoked_reason: reason });
      await trx('users').where({ id: userId }).update({ tokens_valid_after: trx.fn.now() });
    });
  }

  async revokeAccessToken(jti: string, expiresAt: Date): Promise<void> {
    await this.knex('revoked_access_tokens').insert({ jti, expires_at: expiresAt }).onConflict('jti').ignore();
    await this.knex('revoked_access_tokens').where('expires_at', '<', this.knex.fn.now()).delete();
  }

  async sessionsOf(userId: string): Promise<RefreshTokenRow[]> {
    return this.knex<RefreshTokenRow>('refresh_tokens').where({ user_id: userId }).orderBy('created_at');
  }

  // ---------------------------------------------------------------- API keys

  async createApiKey(row: { id: string; user_id: string; name: string; prefix: string; key_hash: string; scopes: string[] }): Promise<ApiKeyRow> {
    const [created] = await this.knex<ApiKeyRow>('api_keys').insert(row).returning('*');
    return created as ApiKeyRow;
  }

  async countActiveApiKeys(userId: string): Promise<number> {
    const [row] = await this.knex('api_keys').where({ user_id: userId }).whereNull('revoked_at').count<{ count: string }[]>('* as count');
    return Number(row?.count ?? 0);
  }

  async listApiKeys(userId: string, limit: number, offset: number): Promise<{ items: ApiKeyRow[]; total: number }> {
    const base = this.knex<ApiKeyRow>('api_keys').where({ user_id: userId }).whereNull('revoked_at');
    const [items, [count]] = await Promise.all([
      base.clone().orderBy('created_at', 'desc').orderBy('id').limit(limit).offset(offset),
      base.clone().count<{ count: string }[]>('* as count'),
    ]);
    return { items: items as ApiKeyRow[], total: Number(count?.count ?? 0) };
  }

  async revokeApiKey(userId: string, id: string): Promise<boolean> {
    const updated = await this.knex('api_keys').where({ id, user_id: userId }).whereNull('revoked_at').update({ revoked_at: this.knex.fn.now() });
    return updated > 0;
  }

  async apiKeyByHash(hash: string): Promise<{ key: ApiKeyRow; user: UserRow } | undefined> {
    const key = await this.knex<ApiKeyRow>('api_keys').where({ key_hash: hash }).whereNull('revoked_at').first();
    if (!key) return undefined;
    const user = await this.findUser(key.user_id);
    return user ? { key, user } : undefined;
  }

  /** Records use at most once a minute per key, so a busy key does not write on every request. */
  async touchApiKey(id: string): Promise<void> {
    await this.knex('api_keys')
      .where({ id })
      .andWhere((q) => q.whereNull('last_used_at').orWhere('last_used_at', '<', this.knex.raw(`now() - interval '60 seconds'`)))
      .update({ last_used_at: this.knex.fn.now() });
  }

  async apiKeysOf(userId: string): Promise<ApiKeyRow[]> {
    return this.knex<ApiKeyRow>('api_keys').where({ user_id: userId }).orderBy('created_at');
  }

  // ---------------------------------------------------------------- credits

  async balance(userId: string): Promise<number | undefined> {
    const row = await this.knex('users').where({ id: userId }).first('balance');
    return row ? Number(row.balance) : undefined;
  }

  private async applyGrant(
    trx: Knex,
    userId: string,
    amount: number,
    kind: 'grant' | 'signup_grant',
    key: string,
    operation: string | null,
    metadata: object,
  ): Promise<LedgerOutcome> {
    const [updated] = await trx('users').where({ id: userId }).increment('balance', amount).returning('balance');
    if (!updated) throw new UnknownUser(userId);
    const balance = Number((updated as { balance: string }).balance);
    const [entry] = await trx<LedgerRow>('credit_ledger')
      .insert({ user_id: userId, amount, balance_after: balance, kind, operation, idempotency_key: key, metadata: JSON.stringify(metadata) as never })
      .returning('*');
    return { entry: entry as LedgerRow, balance, replayed: false };
  }

  private async replay(userId: string, key: string, expect: { amount: number; kind: string }): Promise<LedgerOutcome | undefined> {
    const entry = await this.knex<LedgerRow>('credit_ledger').where({ user_id: userId, idempotency_key: key }).first();
    if (!entry) return undefined;
    if (Number(entry.amount) !== expect.amount || entry.kind !== expect.kind) {
      throw new IdempotencyConflict(`idempotency key ${key} was used for a different ${entry.kind} of ${entry.amount}`);
    }
    return { entry, balance: (await this.balance(userId)) ?? 0, replayed: true };
  }

  /** Adds credits; the same idempotency key never grants twice. */
  async grant(userId: string, amount: number, key: string, operation: string | null, metadata: object = {}): Promise<LedgerOutcome> {
    const replayed = await this.replay(userId, key, { amount, kind: 'grant' });
    if (replayed) return replayed;
    try {
      return await this.knex.transaction((trx) => this.applyGrant(trx, userId, amount, 'grant', key, operation, metadata));
    } catch (error) {
      if (!isUniqueViolation(error)) throw error;
      return (await this.replay(userId, key, { amount, kind: 'grant' }))!;
    }
  }

  /**
   * Takes `amount` credits if the balance covers them. The debit and its ledger entry are one statement
   * (a data-modifying CTE): the conditional update is the only check, so concurrent charges can never
   * overdraw, and the row lock is held for that one statement. A read without a lock answers replays and
   * obvious shortfalls first. The same idempotency key never charges twice.
   */
  async charge(userId: string, amount: number, key: string, operation: string, metadata: object = {}, settleWithinMs?: number): Promise<LedgerOutcome> {
    const pre = await this.knex('users')
      .leftJoin('credit_ledger', (join) => join.on('credit_ledger.user_id', 'users.id').andOnVal('credit_ledger.idempotency_key', key))
      .where('users.id', userId)
      .first('users.balance as current_balance', 'credit_ledger.id as entry_id');
    if (!pre) throw new UnknownUser(userId);
    if (pre.entry_id) return (await this.replay(userId, key, { amount: -amount, kind: 'charge' }))!;
    if (Number(pre.current_balance) < amount) throw new InsufficientCredits(amount, Number(pre.current_balance));
    try {
      const result = await this.knex.raw<{ rows: LedgerRow[] }>(
        `with debit as (
           update users set balance = balance - ?, updated_at = now() where id = ? and balance >= ? returning balance
         )
         , entry as (
           insert into credit_ledger (user_id, amount, balance_after, kind, operation, idempotency_key, metadata)
           select ?, ?, debit.balance, 'charge', ?, ?, ?::jsonb from debit
           returning *
         )
         , opened as (
           insert into open_charges (user_id, charge_key, settle_by)
           select user_id, idempotency_key, now() + make_interval(secs => ?::double precision) from entry where ?::double precision is not null
         )
         select * from entry`,
        [
          amount,
          userId,
          amount,
          userId,
          -amount,
          operation,
          key,
          JSON.stringify(metadata),
          ...Array(2).fill(settleWithinMs === undefined ? null : settleWithinMs / 1000),
        ],
      );
      const entry = result.rows[0];
      if (!entry) {
        const available = await this.balance(userId);
        if (available === undefined) throw new UnknownUser(userId);
        throw new InsufficientCredits(amount, available);
      }
      return { entry, balance: Number(entry.balance_after), replayed: false };
    } catch (error) {
      if (!isUniqueViolation(error)) throw error;
      return (await this.replay(userId, key, { amount: -amount, kind: 'charge' }))!;
    }
  }

  /**
   * The compensating entry for a charge; a charge is refunded at most once, and is no longer open after.
   * `onlyIfOpen`: only a charge still open is refunded (the sweep of charges a stopped replica left must
   * not refund one that its call settled as delivered meanwhile).
   */
  async refund(userId: string, chargeKey: string, reason: string, onlyIfOpen = false): Promise<LedgerOutcome | undefined> {
    const charge = await this.knex<LedgerRow>('credit_ledger').where({ user_id: userId, idempotency_key: chargeKey, kind: 'charge' }).first();
    if (!charge) return undefined;
    const amount = -Number(charge.amount);
    const key = `refund:${chargeKey}`;
    try {
      return await this.knex.transaction(async (trx) => {
        const closed = await this.closeCharge(userId, chargeKey, trx);
        if (onlyIfOpen && !closed) return undefined;
        const [updated] = await trx('users').where({ id: userId }).increment('balance', amount).returning('balance');
        if (!updated) throw new UnknownUser(userId);
        const balance = Number((updated as { balance: string }).balance);
        const [entry] = await trx<LedgerRow>('credit_ledger')
          .insert({
            user_id: userId,
            amount,
            balance_after: balance,
            kind: 'refund',
            operation: charge.operation,
            idempotency_key: key,
            refund_of: charge.id,
            metadata: JSON.stringify({ reason }) as never,
          })
          .returning('*');
        return { entry: entry as LedgerRow, balance, replayed: false };
      });
    } catch (error) {
      if (!isUniqueViolation(error)) throw error;
      await this.closeCharge(userId, chargeKey);
      const entry = await this.knex<LedgerRow>('credit_ledger').where({ refund_of: charge.id }).first();
      return entry ? { entry, balance: (await this.balance(userId)) ?? 0, replayed: true } : undefined;
    }
  }

  /**
   * The key to charge a call under that a client keyed `base` (its Idempotency-Key): `base` at first, the
   * same key again while that charge stands (a retry rides on it, replayed), and a new one (`base#2`, …)
   * once it was refunded, since the call it paid for failed and a retry is a new attempt to be paid.
   */
  async chargeKeyFor(userId: string, base: string): Promise<string> {
    const latest = await this.knex('credit_ledger as c')
      .where({ 'c.user_id': userId, 'c.kind': 'charge' })
      .andWhere((where) => where.where('c.idempotency_key', base).orWhereLike('c.idempotency_key', `${base}#%`))
      .orderBy('c.id', 'desc')
      .first('c.idempotency_key', this.knex.raw('exists (select 1 from credit_ledger r where r.refund_of = c.id) as refunded'));
    if (!latest) return base;
    if (!latest.refunded) return latest.idempotency_key as string;
    const attempt = Number(/#(\d+)$/.exec(latest.idempotency_key as string)?.[1] ?? 1);
    return `${base}#${attempt + 1}`;
  }

  async isChargeOpen(userId: string, chargeKey: string): Promise<boolean> {
    return (await this.knex('open_charges').where({ user_id: userId, charge_key: chargeKey }).first('charge_key')) !== undefined;
  }

  /** Ends a charge's open state (its call delivered, or a job follows it now); whether it was open. */
  async closeCharge(userId: string, chargeKey: string, trx: Knex = this.knex): Promise<boolean> {
    return (await trx('open_charges').where({ user_id: userId, charge_key: chargeKey }).delete()) > 0;
  }

  /**
   * Charges left open past their settle_by, leased to this replica for `leaseMs` (another takes them up
   * after that if this one stops too).
   */
  async leaseUnsettledCharges(leaseMs: number, limit: number): Promise<{ user_id: string; charge_key: string }[]> {
    const result = await this.knex.raw<{ rows: { user_id: string; charge_key: string }[] }>(
      `update open_charges set settle_by = now() + make_interval(secs => ?)
       where (user_id, charge_key) in (select user_id, charge_key from open_charges where settle_by <= now() order by settle_by limit ? for update skip locked)
       returning user_id, charge_key`,
      [leaseMs / 1000, limit],
    );
    return result.rows;
  }

  async history(userId: string, limit: number, offset: number): Promise<{ items: LedgerRow[]; total: number }> {
    const base = this.knex<LedgerRow>('credit_ledger').where({ user_id: userId });
    const [items, [count]] = await Promise.all([
      base.clone().orderBy('id', 'desc').limit(limit).offset(offset),
      base.clone().count<{ count: string }[]>('* as count'),
    ]);
    return { items: items as LedgerRow[], total: Number(count?.count ?? 0) };
  }

  /** The user's ledger in order, a page after `afterId` at a time (the export streams it whole). */
  async ledgerAfter(userId: string, afterId: number, limit: number): Promise<LedgerRow[]> {
    return (await this.knex<LedgerRow>('credit_ledger').where({ user_id: userId }).andWhere('id', '>', afterId).orderBy('id').limit(limit)) as LedgerRow[];
  }

  async ledgerSum(userId: string): Promise<number> {
    const [row] = await this.knex('credit_ledger').where({ user_id: userId }).sum<{ sum: string | null }[]>('amount as sum');
    return Number(row?.sum ?? 0);
  }
}

class LostRace extends Error {}
