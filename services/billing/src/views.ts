import type { Catalogue } from './domain/catalogue.ts';
import { accessUntil } from './domain/tiers.ts';
import type { HistoryRow, OutboxRow, PaymentRow, SubscriptionRow } from './repository/index.ts';

const iso = (date: Date | null) => (date ? date.toISOString() : null);
const num = (value: string | number | null) => (value === null ? null : Number(value));

/** One page of a list held in memory (the catalogue), in the list envelope. */
export const pageOf = <T, V>(all: readonly T[], view: (item: T) => V, page: { limit: number; offset: number }) => ({
  items: all.slice(page.offset, page.offset + page.limit).map(view),
  total: all.length,
  limit: page.limit,
  offset: page.offset,
});

export const packView = (pack: Catalogue['packs'][number]) => ({
  id: pack.id,
  name: pack.name,
  credits: pack.credits,
  price: pack.price,
  apple_product_id: pack.apple_product_id ?? null,
});
export const planView = (plan: Catalogue['plans'][number]) => ({
  id: plan.id,
  name: plan.name,
  tier: plan.tier,
  monthly_credits: plan.monthly_credits,
  price: plan.price,
  interval: 'month' as const,
  apple_product_id: plan.apple_product_id ?? null,
});

export const subscriptionView = (row: SubscriptionRow, graceMs: number) => ({
  provider: row.provider,
  id: row.ref,
  plan_id: row.plan_id,
  status: row.status,
  current_period_end: iso(row.period_end),
  cancel_at_period_end: row.cancel_at_period_end,
  past_due_since: iso(row.past_due_since),
  access_until: iso(accessUntil({ ...row, version: Number(row.version) }, graceMs)),
});

export const historyView = (row: HistoryRow) => ({
  id: String(row.id),
  kind: row.kind,
  description: row.description,
  credits: row.credits,
  provider: row.provider,
  ref: row.ref,
  amount: num(row.amount),
  currency: row.currency,
  created_at: row.created_at.toISOString(),
});

export const outboxView = (row: OutboxRow) => ({
  id: String(row.id),
  kind: row.kind,
  amount: row.amount,
  sent_amount: row.sent_amount,
  taken: row.taken,
  idempotency_key: row.idempotency_key,
  operation: row.operation,
  status: row.status,
  attempts: row.attempts,
  last_error: row.last_error,
  created_at: row.created_at.toISOString(),
  delivered_at: iso(row.delivered_at),
});

export const paymentView = (row: PaymentRow) => ({
  provider: row.provider,
  ref: row.ref,
  item: row.item_id,
  credits: row.credits,
  credits_taken_back: row.credits_taken_back,
  refunded_amount: Number(row.refunded_amount),
  disputed: row.disputed,
  revoked: row.revoked,
  granted_at: iso(row.granted_at),
});

/** A payment as the user's data export holds it: all billing keeps of it. */
export const paymentExportView = (row: PaymentRow) => ({
  provider: row.provider,
  ref: row.ref,
  item_kind: row.item_kind,
  item_id: row.item_id,
  subscription_ref: row.subscription_ref,
  credits: row.credits,
  amount: num(row.amount),
  currency: row.currency,
  payment_intent: row.payment_intent,
  granted_at: iso(row.granted_at),
  refunded_amount: Number(row.refunded_amount),
  refunded_of: num(row.refunded_of),
  disputed: row.disputed,
  revoked: row.revoked,
  credits_taken_back: row.credits_taken_back,
  created_at: row.created_at.toISOString(),
});
