import { randomUUID } from 'node:crypto';
import type { Knex } from '@tempora/kit/data';
import type { Tier } from '../domain/limits.ts';
import { applyGrant } from './ledger.ts';

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

export interface NewIdentity {
  provider: string;
  subject: string;
  email?: string | null | undefined;
  name?: string | null | undefined;
  isDemo?: boolean;
  tier?: Tier;
  signupCredits: number;
}

class LostRace extends Error {}

/** Users and the sign-in identities that reach them (`users`, `identities`). */
export class Users {
  private readonly knex: Knex;
  constructor(knex: Knex) {
    this.knex = knex;
  }

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

  /** Oldest first, ties by (provider, subject), their key: the export's order (docs/accounts.md), the same on every read. */
  async identitiesOf(userId: string): Promise<IdentityRow[]> {
    return this.knex<IdentityRow>('identities').where({ user_id: userId }).orderBy(['created_at', 'provider', 'subject']);
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
            await applyGrant(trx, id, identity.signupCredits, 'signup_grant', `signup:${id}`, 'signup', {});
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
}
