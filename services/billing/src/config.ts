import { X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { baseConfigSchema, csv, optionalString } from '@tempora/kit/runtime';
import { z } from 'zod';
import { CatalogueSchema, DEFAULT_CATALOGUE } from './domain/catalogue.ts';

const positiveInt = (fallback: number) => z.coerce.number().int().min(1).default(fallback);

/** BILLING_CATALOGUE: the JSON itself or the path of a file holding it; unset: the default catalogue. */
const catalogue = optionalString.transform((value, ctx) => {
  if (value === undefined) return DEFAULT_CATALOGUE;
  let text = value;
  try {
    if (!value.startsWith('{')) text = readFileSync(value, 'utf8');
    const parsed = CatalogueSchema.safeParse(JSON.parse(text));
    if (parsed.success) return parsed.data;
    for (const issue of parsed.error.issues) ctx.addIssue({ code: 'custom', message: `${issue.path.join('.')}: ${issue.message}` });
  } catch (error) {
    ctx.addIssue({ code: 'custom', message: `not a readable JSON catalogue: ${(error as Error).message}` });
  }
  return z.NEVER;
});

/**
 * APPLE_ROOT_CERTIFICATES: PEM text (one or more certificates), or comma-separated paths of PEM or DER
 * files. Each is parsed here, so a broken certificate stops the start instead of every purchase.
 */
const appleRoots = optionalString.transform((value, ctx) => {
  if (value === undefined) return [];
  try {
    const blobs = value.includes('-----BEGIN')
      ? [value]
      : value
          .split(',')
          .map((path) => path.trim())
          .filter(Boolean)
          .map((path) => readFileSync(path));
    const certificates = blobs.flatMap((blob) => {
      const text = Buffer.isBuffer(blob) ? blob.toString('latin1') : blob;
      if (!text.includes('-----BEGIN')) return [Buffer.from(blob as Buffer)];
      return [...text.matchAll(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g)].map((match) => Buffer.from(match[0]));
    });
    return certificates.map((certificate) => new X509Certificate(certificate).raw);
  } catch (error) {
    ctx.addIssue({ code: 'custom', message: `not readable certificates: ${(error as Error).message}` });
    return z.NEVER;
  }
});

export const BillingConfigSchema = baseConfigSchema('billing')
  .extend({
    BILLING_CATALOGUE: catalogue,

    /** Secret API key; unset: no checkout route (404; webhooks still verify with STRIPE_WEBHOOK_SECRET). */
    STRIPE_SECRET_KEY: optionalString,
    /** Endpoint signing secrets (whsec_…), comma-separated: the old and the new one while rotating; unset: no Stripe webhook route (404). */
    STRIPE_WEBHOOK_SECRET: csv,
    /** Where the Stripe API is (a local stand-in in tests and development); unset: Stripe's own. */
    STRIPE_API_URL: optionalString.pipe(z.url().optional()),
    STRIPE_WEBHOOK_TOLERANCE_SECONDS: positiveInt(300),
    STRIPE_TIMEOUT_MS: positiveInt(10_000),
    /** Where Checkout sends the buyer back; `{CHECKOUT_SESSION_ID}` is Stripe's placeholder. */
    CHECKOUT_SUCCESS_URL: optionalString.pipe(z.url().optional()),
    CHECKOUT_CANCEL_URL: optionalString.pipe(z.url().optional()),
    /** Where Stripe's customer portal sends the user back; unset: CHECKOUT_CANCEL_URL (the app's billing page). */
    PORTAL_RETURN_URL: optionalString.pipe(z.url().optional()),

    /** With APPLE_BUNDLE_ID, the App Store channel; unset: no App Store routes (404). */
    APPLE_ROOT_CERTIFICATES: appleRoots,
    APPLE_BUNDLE_ID: optionalString,
    /** Xcode and LocalTesting data is unsigned: the library skips verification for them, so they are refused here. */
    APPLE_ENVIRONMENT: z.enum(['Production', 'Sandbox']).default('Production'),
    /** The app's App Store id; checked on notifications in Production. */
    APPLE_APP_APPLE_ID: z.coerce.number().int().positive().optional(),

    /** X-Service-Key presented to the gateway; unset: the first SERVICE_KEY. */
    GATEWAY_SERVICE_KEY: optionalString,
    GATEWAY_TIMEOUT_MS: positiveInt(5_000),
    /** Sleep of the outbox between passes when nothing is due. */
    OUTBOX_POLL_MS: positiveInt(1_000),
    /** Longest wait between two attempts at one delivery (the wait doubles from 1 s up to this). */
    OUTBOX_RETRY_MAX_MS: positiveInt(300_000),
    /** How long a subscriber whose renewal payment failed keeps the plan's tier (days; fractions allowed). */
    PAST_DUE_GRACE_DAYS: z.coerce.number().min(0).max(90).default(14),
    WEBHOOK_BODY_LIMIT: z
      .string()
      .regex(/^\d+(b|kb|mb)$/i)
      .default('256kb'),
  })
  .superRefine((config, ctx) => {
    if (config.STRIPE_SECRET_KEY && (!config.CHECKOUT_SUCCESS_URL || !config.CHECKOUT_CANCEL_URL)) {
      ctx.addIssue({
        code: 'custom',
        path: ['CHECKOUT_SUCCESS_URL'],
        message: 'CHECKOUT_SUCCESS_URL and CHECKOUT_CANCEL_URL are needed with STRIPE_SECRET_KEY',
      });
    }
    if (config.APPLE_ROOT_CERTIFICATES.length > 0 && !config.APPLE_BUNDLE_ID) {
      ctx.addIssue({ code: 'custom', path: ['APPLE_BUNDLE_ID'], message: 'needed with APPLE_ROOT_CERTIFICATES' });
    }
    if (config.APPLE_ROOT_CERTIFICATES.length > 0 && config.APPLE_ENVIRONMENT === 'Production' && config.APPLE_APP_APPLE_ID === undefined) {
      ctx.addIssue({ code: 'custom', path: ['APPLE_APP_APPLE_ID'], message: 'needed in the Production environment' });
    }
  });
export type BillingConfig = z.output<typeof BillingConfigSchema>;
