import type { ApiKeyRow, IdentityRow, LedgerRow, RefreshTokenRow, UserRow } from './repository/index.ts';

const iso = (value: Date | string | null | undefined) => (value ? new Date(value).toISOString() : null);

export const userView = (user: UserRow, identities: IdentityRow[] = []) => ({
  id: user.id,
  email: user.email,
  name: user.name,
  tier: user.tier,
  is_demo: user.is_demo,
  balance: Number(user.balance),
  providers: [...new Set(identities.map((identity) => identity.provider))],
  created_at: iso(user.created_at)!,
});

export const apiKeyView = (key: ApiKeyRow) => ({
  id: key.id,
  name: key.name,
  prefix: key.prefix,
  scopes: key.scopes,
  created_at: iso(key.created_at)!,
  last_used_at: iso(key.last_used_at),
  revoked_at: iso(key.revoked_at),
});

export const ledgerView = (entry: LedgerRow) => ({
  id: String(entry.id),
  amount: Number(entry.amount),
  balance_after: Number(entry.balance_after),
  kind: entry.kind,
  operation: entry.operation,
  idempotency_key: entry.idempotency_key,
  refund_of: entry.refund_of === null ? null : String(entry.refund_of),
  created_at: iso(entry.created_at)!,
});

export const identityView = (identity: IdentityRow) => ({
  provider: identity.provider,
  subject: identity.subject,
  email: identity.email,
  created_at: iso(identity.created_at)!,
});

export const sessionView = (session: RefreshTokenRow) => ({
  id: session.id,
  family_id: session.family_id,
  created_at: iso(session.created_at)!,
  expires_at: iso(session.expires_at)!,
  rotated_at: iso(session.rotated_at),
  revoked_at: iso(session.revoked_at),
  revoked_reason: session.revoked_reason,
});
