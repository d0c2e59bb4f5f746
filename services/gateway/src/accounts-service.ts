import { randomUUID } from 'node:crypto';
import { notFound, Problem } from '@tempora/kit/http';
import type { Logger } from '@tempora/kit/observability';
import type { AccountDeletions, DeletionReport } from './accounts/account-deletions.ts';
import { exportDocument } from './accounts/account-export.ts';
import type { AccountServices } from './accounts/account-services.ts';
import type { AuthCache } from './auth-cache.ts';
import type { UserPrincipal } from './credentials.ts';
import type { Tier } from './domain/limits.ts';
import type { ExternalIdentity } from './domain/providers.ts';
import { API_KEY_PREFIX, API_KEY_VISIBLE, opaqueSecret, sha256 } from './domain/secrets.ts';
import type { GatewayMetrics } from './metrics.ts';
import type { ApiKeyRow, GatewayRepository, IdentityRow, UserRow } from './repository/index.ts';

export const MAX_ACTIVE_API_KEYS = 20;

export interface AccountsDeps {
  repository: GatewayRepository;
  /** Cleared after every change to who may authenticate as what. */
  authCache: AuthCache;
  metrics: GatewayMetrics;
  /** Each service's side of account deletion and export. */
  accountServices: AccountServices;
  deletions: AccountDeletions;
  logger: Logger;
  /** SIGNUP_CREDITS: what a user resolved into existence is granted. */
  signupCredits: number;
}

/** A user with the identities that sign in to it. */
export interface Profile {
  user: UserRow;
  identities: IdentityRow[];
}

/**
 * The accounts' behaviour, independent of HTTP: users found or created by an external identity, their tier,
 * linked sign-in identities, API keys, and the account's export and deletion.
 */
export class AccountsService {
  private readonly repository: GatewayRepository;
  private readonly deps: AccountsDeps;
  /** The durable deletions, swept in the background (service.ts starts and stops them). */
  readonly deletions: AccountDeletions;

  constructor(deps: AccountsDeps) {
    this.deps = deps;
    this.repository = deps.repository;
    this.deletions = deps.deletions;
  }

  identities(userId: string): Promise<IdentityRow[]> {
    return this.repository.users.identitiesOf(userId);
  }

  /** Finds or creates the user of an external id; safe under concurrent calls. */
  async resolve(external: {
    provider: string;
    subject: string;
    email?: string | undefined;
    name?: string | undefined;
  }): Promise<Profile & { created: boolean }> {
    const { user, created } = await this.repository.users.findOrCreateByIdentity({ ...external, signupCredits: this.deps.signupCredits });
    return { user, identities: await this.identities(user.id), created };
  }

  async setTier(userId: string, tier: Tier): Promise<Profile> {
    const user = await this.repository.users.findUser(userId);
    if (!user) throw notFound(`no user ${userId}`);
    await this.repository.users.setTier(user.id, tier);
    this.deps.authCache.clear();
    return { user: { ...user, tier }, identities: await this.identities(user.id) };
  }

  /** Binds a proven identity to the account, never to another one; `linked` is false when it was already. */
  async link(userId: string, identity: ExternalIdentity): Promise<{ linked: boolean; identity: IdentityRow }> {
    const { outcome, identity: row } = await this.repository.users.linkIdentity(userId, identity);
    if (outcome === 'taken')
      throw new Problem(
        409,
        `this ${identity.provider} identity signs in to another account; delete that account or unlink it there first (accounts are never merged)`,
      );
    this.deps.authCache.clear();
    return { linked: outcome === 'linked', identity: row! };
  }

  async unlink(userId: string, provider: string, subject: string): Promise<void> {
    const outcome = await this.repository.users.unlinkIdentity(userId, provider, subject);
    if (outcome === 'missing') throw notFound(`no ${provider} identity ${subject} on this account`);
    if (outcome === 'last') throw new Problem(409, "this is the account's last way to sign in; link another provider first (or delete the account)");
    this.deps.authCache.clear();
  }

  /** A new API key: the key itself is in the answer only; the gateway keeps its SHA-256. */
  async createApiKey(userId: string, name: string, scopes: string[]): Promise<{ row: ApiKeyRow; key: string }> {
    if ((await this.repository.apiKeys.countActiveApiKeys(userId)) >= MAX_ACTIVE_API_KEYS)
      throw new Problem(409, `at most ${MAX_ACTIVE_API_KEYS} active API keys; revoke one first`);
    const key = opaqueSecret(API_KEY_PREFIX);
    const row = await this.repository.apiKeys.createApiKey({
      id: randomUUID(),
      user_id: userId,
      name,
      prefix: key.slice(0, API_KEY_VISIBLE),
      key_hash: sha256(key),
      scopes,
    });
    this.deps.metrics.apiKeys.inc({ action: 'created' });
    return { row, key };
  }

  listApiKeys(userId: string, limit: number, offset: number): Promise<{ items: ApiKeyRow[]; total: number }> {
    return this.repository.apiKeys.listApiKeys(userId, limit, offset);
  }

  /** An API key may revoke itself (a leaked key can be killed with the key alone), but no other key. */
  async revokeApiKey(caller: UserPrincipal, id: string): Promise<void> {
    if (caller.via === 'api_key' && caller.apiKeyId !== id)
      throw new Problem(403, 'an API key can revoke only itself; use a Bearer token to revoke other keys');
    if (!(await this.repository.apiKeys.revokeApiKey(caller.userId, id))) throw notFound(`no active API key ${id}`);
    this.deps.metrics.apiKeys.inc({ action: 'revoked' });
    this.deps.authCache.clear();
  }

  /** The account's whole data as one JSON document, in pieces to stream (accounts/account-export.ts). */
  async exportOf(userId: string, requestId: string): Promise<AsyncGenerator<string>> {
    const user = await this.repository.users.findUser(userId);
    if (!user) throw notFound('the account no longer exists');
    return exportDocument(user, { repository: this.repository, services: this.deps.accountServices, logger: this.deps.logger }, requestId);
  }

  /** Deletes the account everywhere (accounts/account-deletions.ts); undefined when there is none and none on record. */
  async delete(userId: string, requestId: string): Promise<DeletionReport | undefined> {
    const report = await this.deletions.delete(userId, requestId);
    this.deps.authCache.clear();
    return report;
  }
}
