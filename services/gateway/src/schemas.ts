import { AccountDeletionSchema, pageQuery } from '@tempora/kit/http';
import { z } from 'zod';
import { EXPORT_FORMAT, EXPORT_VERSION } from './accounts/account-export.ts';
import { ACCOUNT_SERVICES, type AccountService } from './accounts/account-services.ts';
import { TIERS } from './domain/limits.ts';

export const UserSchema = z
  .object({
    id: z.string(),
    email: z.string().nullable(),
    name: z.string().nullable(),
    tier: z.enum(TIERS),
    is_demo: z.boolean(),
    balance: z.number().int(),
    providers: z.array(z.string()),
    created_at: z.string(),
  })
  .meta({ id: 'User' });

export const TokenPairSchema = z
  .object({
    access_token: z.string(),
    refresh_token: z.string(),
    token_type: z.literal('Bearer'),
    expires_in: z.number().int(),
    refresh_expires_in: z.number().int(),
  })
  .meta({ id: 'TokenPair' });

export const SignInSchema = TokenPairSchema.extend({ user: UserSchema, new_user: z.boolean() }).meta({ id: 'SignIn' });

export const LedgerEntrySchema = z
  .object({
    id: z.string(),
    amount: z.number().int(),
    balance_after: z.number().int(),
    kind: z.enum(['signup_grant', 'grant', 'charge', 'refund']),
    operation: z.string().nullable(),
    idempotency_key: z.string(),
    refund_of: z.string().nullable(),
    created_at: z.string(),
  })
  .meta({ id: 'LedgerEntry' });

export const ApiKeySchema = z
  .object({
    id: z.string(),
    name: z.string(),
    prefix: z.string(),
    scopes: z.array(z.string()),
    created_at: z.string(),
    last_used_at: z.string().nullable(),
    revoked_at: z.string().nullable(),
  })
  .meta({ id: 'ApiKey' });

export const Page = pageQuery();

export const JwksSchema = z
  .object({ keys: z.array(z.object({ kty: z.string(), crv: z.string(), x: z.string(), y: z.string(), kid: z.string(), alg: z.string(), use: z.string() })) })
  .meta({ id: 'JWKS' });

export const AccountDeletionReportSchema = z
  .object({
    user_id: z.string(),
    status: z.enum(['completed', 'pending']).describe('pending: a service has not confirmed yet; the gateway retries until it does'),
    requested_at: z.string(),
    completed_at: z.string().nullable(),
    services: z
      .record(
        z.string(),
        z.union([
          AccountDeletionSchema.extend({ status: z.literal('deleted') }),
          z.object({ status: z.literal('pending'), attempts: z.number().int(), error: z.string().nullable() }),
        ]),
      )
      .describe('Every service holding account data (the gateway included): what it deleted and kept, or that its part is still pending'),
  })
  .meta({ id: 'AccountDeletionReport' });

export const IdentitySchema = z
  .object({ provider: z.string(), subject: z.string(), email: z.string().nullable(), created_at: z.string() })
  .meta({ id: 'Identity', description: "A sign-in provider's identity linked to the account" });

export const CostTableSchema = z
  .object({
    currency: z.literal('credits'),
    operations: z.array(
      z.object({
        operation: z.string().meta({ description: 'the name a charge records, e.g. `generation.balanced`, `simulation.fidelity-3`' }),
        method: z.string(),
        path: z.string(),
        cost: z.number().int(),
        description: z.string(),
      }),
    ),
    grants: z.object({ signup: z.number().int(), demo: z.number().int() }).meta({ description: 'credits a new account and the demo account start with' }),
  })
  .meta({ id: 'CostTable' });

const SessionSchema = z.object({
  id: z.string(),
  family_id: z.string(),
  created_at: z.string(),
  expires_at: z.string(),
  rotated_at: z.string().nullable(),
  revoked_at: z.string().nullable(),
  revoked_reason: z.string().nullable(),
});

/** One service's part of an export: its items by kind, each kind's format the service's own (docs/accounts.md). */
const ServiceExportSchema = z.record(z.string(), z.array(z.unknown()));

export const UserExportSchema = z
  .object({
    format: z.literal(EXPORT_FORMAT),
    version: z.literal(EXPORT_VERSION),
    exported_at: z.string(),
    user: UserSchema,
    identities: z.array(IdentitySchema),
    sessions: z.array(SessionSchema),
    api_keys: z.array(ApiKeySchema),
    credits: z.object({ balance: z.number().int(), ledger: z.array(LedgerEntrySchema) }),
    services: z.object(
      Object.fromEntries(ACCOUNT_SERVICES.map((service) => [service, ServiceExportSchema])) as Record<AccountService, typeof ServiceExportSchema>,
    ),
    errors: z.record(z.string(), z.string()).meta({ description: 'each service whose part is incomplete, and why' }),
    complete: z.boolean(),
  })
  .meta({ id: 'UserExport' });
