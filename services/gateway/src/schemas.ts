import { AccountDeletionSchema, pageQuery } from '@tempora/kit/http';
import { z } from 'zod';
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
