import type { Knex } from '@tempora/kit/data';

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

/** Sign-in sessions (refresh-token families) and the revocations of access tokens. */
export class Sessions {
  private readonly knex: Knex;
  constructor(knex: Knex) {
    this.knex = knex;
  }

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

  /** Oldest first, ties by id: the export's order (docs/accounts.md), the same on every read. */
  async sessionsOf(userId: string): Promise<RefreshTokenRow[]> {
    return this.knex<RefreshTokenRow>('refresh_tokens').where({ user_id: userId }).orderBy(['created_at', 'id']);
  }
}
