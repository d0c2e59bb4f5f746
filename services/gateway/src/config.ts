import { baseConfigSchema, csv } from '@tempora/kit/runtime';
import { z } from 'zod';
import { JwkSetSchema } from './domain/keys.ts';
import { TIER_LIMITS } from './domain/limits.ts';

const optional = z
  .string()
  .optional()
  .transform((value) => (value && value.trim() !== '' ? value.trim() : undefined));
const positiveInt = (fallback: number) => z.coerce.number().int().min(1).default(fallback);
const nonNegativeInt = (fallback: number) => z.coerce.number().int().min(0).default(fallback);
const bool = (fallback: boolean) =>
  z
    .enum(['true', 'false'])
    .default(fallback ? 'true' : 'false')
    .transform((value) => value === 'true');

type TierName = keyof typeof TIER_LIMITS;
const TierLimitsSchema = z.array(
  z.object({
    name: z.enum(Object.keys(TIER_LIMITS) as [TierName, ...TierName[]]),
    requestsPerMinute: z.number().int().min(1),
    dailyLimit: z.number().int().min(1).optional(),
  }),
);

/** A variable holding JSON, parsed with `schema`; `example` is what the error shows a value that is not JSON. */
const jsonText = <S extends z.ZodType>(schema: S, example: string) =>
  optional.transform((text, ctx): z.output<S> | undefined => {
    if (!text) return undefined;
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      ctx.addIssue({ code: 'custom', message: `not JSON: expected ${example}` });
      return z.NEVER;
    }
    const parsed = schema.safeParse(json);
    if (!parsed.success) {
      for (const issue of parsed.error.issues) ctx.addIssue({ code: 'custom', message: `${issue.path.join('.') || '(value)'}: ${issue.message}` });
      return z.NEVER;
    }
    return parsed.data;
  });

/**
 * RATE_LIMIT_TIERS: JSON `[{name, requestsPerMinute, dailyLimit?}]`, as the operator's Gateway writes its
 * spec.rateLimits.tiers. A tier (or a daily limit) left out keeps its default (TIER_LIMITS).
 */
const tierLimits = jsonText(TierLimitsSchema, '[{"name": "free", "requestsPerMinute": 10, "dailyLimit": 100}, ...]').transform((tiers) => {
  const limits = structuredClone(TIER_LIMITS);
  for (const tier of tiers ?? []) limits[tier.name] = { perMinute: tier.requestsPerMinute, perDay: tier.dailyLimit ?? limits[tier.name].perDay };
  return limits;
});

export const GatewayConfigSchema = baseConfigSchema('gateway').extend({
  /** `iss` of every token the gateway signs; other services check it. */
  JWT_ISSUER: z.string().min(1).default('tempora-gateway'),
  /** `aud` of access tokens. */
  JWT_AUDIENCE: z.string().min(1).default('tempora'),
  /** ES256 signing key as a PKCS#8 PEM or a private JWK (JSON). Unset: generated and kept in TEMPORA_DATA_DIR/gateway-keys/signing-keys.json. */
  JWT_PRIVATE_KEY: optional,
  /** Public keys (a JWK Set as JSON) still published after an operator rotated JWT_PRIVATE_KEY. */
  JWT_PREVIOUS_KEYS: jsonText(JwkSetSchema, '{"keys": [{"kty": "EC", "crv": "P-256", "x": "...", "y": "..."}]}'),
  /** Generated keys are replaced after this many days; the old one stays published until its tokens expire. */
  JWT_ROTATION_DAYS: z.coerce.number().min(0.0001).default(30),
  ACCESS_TOKEN_TTL_SECONDS: positiveInt(900),
  REFRESH_TOKEN_TTL_DAYS: positiveInt(30),
  /** A rotated refresh token presented again within this window gets a sibling pair instead of revoking the family. */
  REFRESH_REUSE_GRACE_SECONDS: nonNegativeInt(10),
  SERVICE_TOKEN_MAX_TTL_SECONDS: positiveInt(86_400),
  /** How long a replica may reuse a credential lookup (user row, revocation, API key); 0: look up every request. */
  AUTH_CACHE_MS: nonNegativeInt(1_000),

  APPLE_CLIENT_ID: csv,
  APPLE_ISSUER: z.string().default('https://appleid.apple.com'),
  APPLE_JWKS_URL: z.url().default('https://appleid.apple.com/auth/keys'),
  GOOGLE_CLIENT_ID: csv,
  GOOGLE_ISSUER: csv.transform((list) => (list.length ? list : ['https://accounts.google.com', 'accounts.google.com'])),
  GOOGLE_JWKS_URL: z.url().default('https://www.googleapis.com/oauth2/v3/certs'),
  GITHUB_CLIENT_ID: optional,
  GITHUB_CLIENT_SECRET: optional,
  GITHUB_TOKEN_URL: z.url().default('https://github.com/login/oauth/access_token'),
  GITHUB_API_URL: z.url().default('https://api.github.com'),
  /** Time-out of every call to an identity provider. */
  IDP_TIMEOUT_MS: positiveInt(10_000),

  DEMO_ENABLED: bool(true),
  DEMO_SIGNINS_PER_HOUR: positiveInt(5),
  /** Demo sign-ins per hour from a loopback address (a developer's own machine); unset: DEMO_SIGNINS_PER_HOUR. */
  DEMO_SIGNINS_PER_HOUR_LOOPBACK: z.coerce.number().int().min(1).optional(),
  SIGNUP_CREDITS: nonNegativeInt(50),
  DEMO_CREDITS: nonNegativeInt(20),

  /** Multiplies every tier and per-IP limit (load tests, staging); 1 in production. */
  RATE_LIMIT_MULTIPLIER: z.coerce.number().min(0.001).default(1),
  RATE_LIMIT_TIERS: tierLimits,
  RATE_LIMIT_ANONYMOUS_PER_MINUTE: positiveInt(60),
  RATE_LIMIT_SERVICE_PER_MINUTE: positiveInt(6000),
  /** The spec's access table: every account's reads and writes per minute, whatever its tier. */
  RATE_LIMIT_AUTHENTICATED_READS_PER_MINUTE: positiveInt(300),
  RATE_LIMIT_AUTHENTICATED_WRITES_PER_MINUTE: positiveInt(30),

  /** Time allowed for an upstream to answer with headers (the conductor's answer may wait for a render). */
  UPSTREAM_TIMEOUT_MS: positiveInt(120_000),
  /**
   * The same for a synchronous generation, which answers once its whole render is done: above the
   * generation service's own GENERATION_TIMEOUT_MS (300 s), so that its 504 (naming the agent) arrives first.
   */
  SYNC_GENERATION_TIMEOUT_MS: positiveInt(310_000),
  /** Longest silence allowed inside a streamed upstream body (SSE keeps long streams alive with events). */
  UPSTREAM_BODY_TIMEOUT_MS: positiveInt(300_000),
  UPSTREAM_CONNECT_TIMEOUT_MS: positiveInt(5_000),
  /** A charged call still running after this is cut off (504, or its stream ended) and refunded unless it delivered; above any call's own deadline. */
  CHARGED_CALL_MAX_MS: positiveInt(900_000),
  /** How long a replica retries booking a charged call's settlement the database refused; after that any replica refunds the charge. */
  CHARGE_SETTLE_GRACE_MS: positiveInt(300_000),
  /** A charged call accepted for later (202) has its job checked this long after, then half as often each time, down to once a minute. */
  CHARGED_JOB_CHECK_MS: positiveInt(5_000),
  /** A service that could not delete its part of an account is asked again after this, then twice as long each time (up to an hour). */
  ACCOUNT_DELETION_RETRY_MS: positiveInt(30_000),
  /** How often each replica looks for account-deletion steps that are due. */
  ACCOUNT_DELETION_SWEEP_MS: positiveInt(10_000),
  /** X-Service-Key the gateway presents to each upstream; unset: the first SERVICE_KEY. */
  GENERATION_SERVICE_KEY: optional,
  GRAPH_SERVICE_KEY: optional,
  BILLING_SERVICE_KEY: optional,
  SIMULATION_SERVICE_KEY: optional,
  CONDUCTOR_SERVICE_KEY: optional,
});
export type GatewayConfig = z.output<typeof GatewayConfigSchema>;
