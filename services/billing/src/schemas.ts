import { listEnvelope } from '@tempora/kit/http';
import { z } from 'zod';
import { TIERS } from './domain/catalogue.ts';

/** Response shapes: the OpenAPI document and the tests use these. */

const Money = z.object({ amount: z.number().int().meta({ description: "in the currency's minor unit" }), currency: z.string() });

export const PackViewSchema = z
  .object({ id: z.string(), name: z.string(), credits: z.number().int(), price: Money, apple_product_id: z.string().nullable() })
  .meta({ id: 'CreditPack' });
export const PlanViewSchema = z
  .object({
    id: z.string(),
    name: z.string(),
    tier: z.enum(TIERS),
    monthly_credits: z.number().int(),
    price: Money,
    interval: z.literal('month'),
    apple_product_id: z.string().nullable(),
  })
  .meta({ id: 'Plan' });
export const PackListSchema = listEnvelope(PackViewSchema).meta({ id: 'CreditPackList' });
export const PlanListSchema = listEnvelope(PlanViewSchema).meta({ id: 'PlanList' });

export const SubscriptionViewSchema = z
  .object({
    provider: z.enum(['stripe', 'apple']),
    id: z.string(),
    plan_id: z.string().nullable(),
    status: z.string(),
    current_period_end: z.string().nullable(),
    cancel_at_period_end: z.boolean(),
    past_due_since: z.string().nullable(),
    access_until: z.string().nullable().meta({ description: "past due: when the plan's tier ends unless a payment succeeds" }),
  })
  .meta({ id: 'Subscription' });

export const BillingStateSchema = z
  .object({
    user_id: z.string(),
    tier: z.enum(TIERS),
    subscriptions: z.array(SubscriptionViewSchema),
    debt: z.number().int().meta({ description: 'credits a refund could not take back (spent): taken from the next grants' }),
    pending_credits: z.number().int().meta({ description: "credits granted by billing and not yet in the gateway's ledger" }),
  })
  .meta({ id: 'BillingState' });

export const HistoryEntrySchema = z
  .object({
    id: z.string(),
    kind: z.string(),
    description: z.string(),
    credits: z.number().int().nullable(),
    provider: z.string().nullable(),
    ref: z.string().nullable(),
    amount: z.number().int().nullable(),
    currency: z.string().nullable(),
    created_at: z.string(),
  })
  .meta({ id: 'BillingHistoryEntry' });

export const HistoryPageSchema = listEnvelope(HistoryEntrySchema).meta({ id: 'BillingHistory' });

export const OutboxEntrySchema = z
  .object({
    id: z.string(),
    kind: z.enum(['grant', 'debit']),
    amount: z.number().int(),
    sent_amount: z.number().int().nullable(),
    taken: z.number().int().nullable(),
    idempotency_key: z.string(),
    operation: z.string(),
    status: z.enum(['pending', 'delivered', 'failed']),
    attempts: z.number().int(),
    last_error: z.string().nullable(),
    created_at: z.string(),
    delivered_at: z.string().nullable(),
  })
  .meta({ id: 'OutboxEntry' });

export const OperatorStateSchema = BillingStateSchema.extend({
  pushed_tier: z.enum(TIERS).nullable(),
  push_error: z.string().nullable(),
  payments: z.array(
    z.object({
      provider: z.string(),
      ref: z.string(),
      item: z.string().nullable(),
      credits: z.number().int(),
      credits_taken_back: z.number().int(),
      refunded_amount: z.number().int(),
      disputed: z.boolean(),
      revoked: z.boolean(),
      granted_at: z.string().nullable(),
    }),
  ),
  outbox: z.array(OutboxEntrySchema),
}).meta({ id: 'OperatorBillingState' });

export const RecordedSchema = z
  .object({ received: z.literal(true), outcome: z.enum(['applied', 'duplicate', 'unchanged', 'ignored', 'unmatched']), detail: z.string().nullable() })
  .meta({ id: 'Recorded' });

export const PortalSessionSchema = z
  .object({ url: z.string().meta({ description: "Stripe's customer portal for the caller: send them here (it expires shortly; ask again for a new one)" }) })
  .meta({ id: 'PortalSession' });
