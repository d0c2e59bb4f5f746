import { z } from 'zod';
import type { Catalogue } from './catalogue.ts';
import { asUserId, type Interpretation, MalformedMessage, type SubscriptionChange } from './intents.ts';

const metadata = z
  .record(z.string(), z.string())
  .nullish()
  .transform((value) => value ?? {});
const id = z.string().min(1).max(255);
const expandable = z
  .union([id, z.object({ id })])
  .nullish()
  .transform((value) => (value == null ? null : typeof value === 'string' ? value : value.id));

/** Only the fields billing reads: Stripe adds fields freely, so the rest passes unchecked. */
export const StripeEventSchema = z.object({
  id,
  type: z.string().min(1),
  created: z.number().int(),
  livemode: z.boolean().optional(),
  data: z.object({ object: z.record(z.string(), z.unknown()) }),
});
export type StripeEvent = z.output<typeof StripeEventSchema>;

const Session = z.object({
  id,
  mode: z.string(),
  payment_status: z.string(),
  payment_intent: expandable,
  subscription: expandable,
  customer: expandable,
  client_reference_id: z.string().nullish(),
  metadata,
  amount_total: z.number().int().nullish(),
  currency: z.string().nullish(),
});
const Invoice = z.object({
  id,
  billing_reason: z.string().nullish(),
  amount_paid: z.number().int().nullish(),
  currency: z.string().nullish(),
  parent: z.object({ subscription_details: z.object({ subscription: expandable, metadata }).nullish() }).nullish(),
});
const Subscription = z.object({
  id,
  status: z.string(),
  metadata,
  cancel_at_period_end: z.boolean().nullish(),
  items: z.object({ data: z.array(z.object({ price: z.object({ id }), current_period_end: z.number().int().nullish() })) }),
});
const Charge = z.object({ id, amount: z.number().int().min(0), amount_refunded: z.number().int().min(0), payment_intent: expandable });
const Dispute = z.object({ id, status: z.string(), payment_intent: expandable, charge: expandable });

function parse<S extends z.ZodType>(schema: S, event: StripeEvent): z.output<S> {
  const result = schema.safeParse(event.data.object);
  if (!result.success) {
    throw new MalformedMessage(`${event.type} ${event.id}: ${result.error.issues.map((issue) => `${issue.path.join('.')}: ${issue.message}`).join('; ')}`);
  }
  return result.data;
}

const PAID = new Set(['paid', 'no_payment_required']);
/** Invoices that open a period (and so carry its allowance); proration and manual invoices do not. */
const PERIOD_INVOICES = new Set(['subscription_create', 'subscription_cycle']);

const subscriptionChange = (event: StripeEvent, fields: Omit<SubscriptionChange, 'kind' | 'provider' | 'version' | 'graceUntil'>): SubscriptionChange => ({
  kind: 'subscription',
  provider: 'stripe',
  version: event.created * 1000,
  graceUntil: null,
  ...fields,
});

/** What a verified Stripe event means for billing. Throws MalformedMessage when a field billing needs is not there. */
export function interpretStripeEvent(event: StripeEvent, catalogue: Catalogue): Interpretation {
  switch (event.type) {
    case 'checkout.session.completed':
    case 'checkout.session.async_payment_succeeded':
      return checkoutPaid(event, catalogue);
    case 'invoice.paid':
    case 'invoice.payment_failed':
      return invoiceSettled(event, catalogue);
    case 'customer.subscription.created':
    case 'customer.subscription.updated':
    case 'customer.subscription.deleted':
      return subscriptionChanged(event, catalogue);
    case 'charge.refunded':
      return chargeRefunded(event);
    case 'charge.dispute.created':
    case 'charge.dispute.closed':
      return disputeChanged(event);
    default:
      return { ignored: `event type ${event.type} is not one billing acts on` };
  }
}

/** A paid Checkout session: a pack bought, or a subscription begun (the subscription's own events carry the rest). */
function checkoutPaid(event: StripeEvent, catalogue: Catalogue): Interpretation {
  const session = parse(Session, event);
  const userId = asUserId(session.metadata.user_id) ?? asUserId(session.client_reference_id);
  if (!userId) return { ignored: 'not a Tempora checkout (no user id)' };
  if (!PAID.has(session.payment_status)) return { ignored: `payment ${session.payment_status}: the payment's own event follows` };
  if (session.mode === 'payment') {
    const pack = catalogue.pack(session.metadata.pack_id ?? '');
    if (!pack) return { ignored: `pack ${session.metadata.pack_id ?? '(none)'} is not in the catalogue` };
    return {
      userId,
      intents: [
        {
          kind: 'purchase',
          provider: 'stripe',
          ref: session.payment_intent ?? session.id,
          userId,
          item: { kind: 'pack', packId: pack.id },
          amount: session.amount_total ?? null,
          currency: session.currency ?? null,
          paymentIntent: session.payment_intent,
        },
      ],
    };
  }
  if (session.mode === 'subscription') {
    if (!session.subscription) throw new MalformedMessage(`${event.type} ${event.id}: a subscription checkout without its subscription`);
    const plan = catalogue.plan(session.metadata.plan_id ?? '');
    return {
      userId,
      intents: [
        subscriptionChange(event, {
          ref: session.subscription,
          userId,
          planId: plan?.id ?? null,
          status: 'active',
          periodEnd: null,
          cancelAtPeriodEnd: null,
          onlyIfNew: true,
        }),
      ],
    };
  }
  return { ignored: `checkout mode ${session.mode}` };
}

/** A subscription invoice paid or failed: the subscription active or past due, and a period's allowance when it opens one. */
function invoiceSettled(event: StripeEvent, catalogue: Catalogue): Interpretation {
  const invoice = parse(Invoice, event);
  const details = invoice.parent?.subscription_details;
  if (!details?.subscription) return { ignored: 'not a subscription invoice' };
  const userId = asUserId(details.metadata.user_id);
  const planId = catalogue.plan(details.metadata.plan_id ?? '')?.id ?? null;
  const base = { ref: details.subscription, userId, planId, periodEnd: null, cancelAtPeriodEnd: null };
  if (event.type === 'invoice.payment_failed') return { userId, intents: [subscriptionChange(event, { ...base, status: 'past_due' })] };
  const change = subscriptionChange(event, { ...base, status: 'active' });
  if (!PERIOD_INVOICES.has(invoice.billing_reason ?? '')) return { userId, intents: [change] };
  return {
    userId,
    intents: [
      change,
      {
        kind: 'purchase',
        provider: 'stripe',
        ref: invoice.id,
        userId,
        item: { kind: 'allowance', planId, subscriptionRef: details.subscription },
        amount: invoice.amount_paid ?? null,
        currency: invoice.currency ?? null,
        paymentIntent: null,
      },
    ],
  };
}

/** A subscription's own state: its plan, status, period end and whether it cancels at that end. */
function subscriptionChanged(event: StripeEvent, catalogue: Catalogue): Interpretation {
  const subscription = parse(Subscription, event);
  const item = subscription.items.data[0];
  const planId = (item && catalogue.planByStripePrice(item.price.id)?.id) ?? catalogue.plan(subscription.metadata.plan_id ?? '')?.id ?? null;
  const userId = asUserId(subscription.metadata.user_id);
  const status = event.type === 'customer.subscription.deleted' ? 'canceled' : subscription.status;
  const periodEnd = item?.current_period_end ? new Date(item.current_period_end * 1000) : null;
  return {
    userId,
    intents: [
      subscriptionChange(event, { ref: subscription.id, userId, planId, status, periodEnd, cancelAtPeriodEnd: subscription.cancel_at_period_end ?? null }),
    ],
  };
}

/** A refund of a Checkout payment, in whole or in part. */
function chargeRefunded(event: StripeEvent): Interpretation {
  const charge = parse(Charge, event);
  if (!charge.payment_intent) return { ignored: 'a charge without a PaymentIntent is not a Checkout payment' };
  return {
    userId: null,
    intents: [
      {
        kind: 'adjustment',
        provider: 'stripe',
        ref: null,
        paymentIntent: charge.payment_intent,
        refunded: { amount: charge.amount_refunded, of: charge.amount },
        reason: 'refund',
      },
    ],
  };
}

/** A dispute of a Checkout payment opened or closed. */
function disputeChanged(event: StripeEvent): Interpretation {
  const dispute = parse(Dispute, event);
  if (!dispute.payment_intent) return { ignored: 'a dispute without a PaymentIntent is not about a Checkout payment' };
  // Closed and lost keeps the credits taken; won (or a closed inquiry) gives them back.
  const disputed = event.type === 'charge.dispute.created' || dispute.status === 'lost';
  return {
    userId: null,
    intents: [
      { kind: 'adjustment', provider: 'stripe', ref: null, paymentIntent: dispute.payment_intent, disputed, reason: disputed ? 'dispute' : 'dispute won' },
    ],
  };
}
