import type { Tier } from '../domain/catalogue.ts';
import type { Provider } from '../domain/intents.ts';

export interface EventRow {
  provider: string;
  event_id: string;
  type: string;
  outcome: string;
  detail: string | null;
  user_id: string | null;
  received_at: Date;
}

export interface PaymentRow {
  provider: Provider;
  ref: string;
  user_id: string | null;
  item_kind: 'pack' | 'allowance' | null;
  item_id: string | null;
  subscription_ref: string | null;
  credits: number;
  amount: string | number | null;
  currency: string | null;
  payment_intent: string | null;
  granted_at: Date | null;
  refunded_amount: string | number;
  refunded_of: string | number | null;
  disputed: boolean;
  revoked: boolean;
  credits_taken_back: number;
  adjustments: number;
  created_at: Date;
}

export interface SubscriptionRow {
  provider: Provider;
  ref: string;
  user_id: string | null;
  plan_id: string | null;
  status: string;
  version: string | number;
  period_end: Date | null;
  cancel_at_period_end: boolean;
  past_due_since: Date | null;
  grace_until: Date | null;
  created_at: Date;
  updated_at: Date;
}

export interface AccountRow {
  user_id: string;
  tier: Tier;
  pushed_tier: Tier | null;
  push_attempts: number;
  push_next_attempt_at: Date;
  push_error: string | null;
  debt: string | number;
  push_forced: boolean;
}

export interface OutboxRow {
  id: string;
  user_id: string;
  kind: 'grant' | 'debit';
  amount: number;
  sent_amount: number | null;
  idempotency_key: string;
  operation: string;
  provider: Provider;
  payment_ref: string;
  status: 'pending' | 'delivered' | 'failed';
  attempts: number;
  next_attempt_at: Date;
  lease_until: Date | null;
  last_error: string | null;
  taken: number | null;
  created_at: Date;
  delivered_at: Date | null;
}

export interface HistoryRow {
  id: string;
  user_id: string;
  kind: string;
  description: string;
  credits: number | null;
  provider: string | null;
  ref: string | null;
  amount: string | number | null;
  currency: string | null;
  created_at: Date;
}

export type NewOutboxEntry = Pick<OutboxRow, 'user_id' | 'kind' | 'amount' | 'idempotency_key' | 'operation' | 'provider' | 'payment_ref'>;
export type NewHistoryEntry = Omit<HistoryRow, 'id' | 'created_at'>;

/** A payment's or subscription's key: its provider and the provider's ref. */
export interface ProviderRef {
  provider: string;
  ref: string;
}
