import type { Knex } from '@tempora/kit/data';
import type { UserRow } from './users.ts';

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

/** API keys (`api_keys`): only their SHA-256 is kept. */
export class ApiKeys {
  private readonly knex: Knex;
  constructor(knex: Knex) {
    this.knex = knex;
  }

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
    const user = await this.knex<UserRow>('users').where({ id: key.user_id }).first();
    return user ? { key, user } : undefined;
  }

  /** Records use at most once a minute per key, so a busy key does not write on every request. */
  async touchApiKey(id: string): Promise<void> {
    await this.knex('api_keys')
      .where({ id })
      .andWhere((q) => q.whereNull('last_used_at').orWhere('last_used_at', '<', this.knex.raw(`now() - interval '60 seconds'`)))
      .update({ last_used_at: this.knex.fn.now() });
  }

  /** Oldest first, ties by id: the export's order (docs/accounts.md), the same on every read. */
  async apiKeysOf(userId: string): Promise<ApiKeyRow[]> {
    return this.knex<ApiKeyRow>('api_keys').where({ user_id: userId }).orderBy(['created_at', 'id']);
  }
}
