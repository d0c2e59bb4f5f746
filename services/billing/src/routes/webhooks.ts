import { defineRoute, Problem, type RouteDefinition } from '@tempora/kit/http';
import type { Context } from 'koa';
import type { Interpretation } from '../domain/intents.ts';
import { Refusal } from '../refusal.ts';
import { RecordedSchema } from '../schemas.ts';
import { type BillingRouteDeps, whenConfigured } from './context.ts';

export const WEBHOOK_PREFIX = '/api/v1/billing/webhooks/';

const responses = {
  200: { description: 'Durably recorded (or recorded before): the provider may stop retrying', schema: RecordedSchema },
  400: { description: 'Not verifiable: nothing was recorded (counted in billing_refusals_total)' },
};

export function webhookRoutes(deps: BillingRouteDeps): RouteDefinition[] {
  // Long on purpose: a table of routes, one block per route, each handler short.
  const { stripe, apple, book, outbox, metrics, logger, repository } = deps;

  /** Counts and logs a refusal (its reason and our words, never the payload) and answers 400. */
  const refuse = (ctx: Context, channel: string, error: Refusal): never => {
    metrics.refusals.inc({ channel, reason: error.reason });
    logger.warn({ channel, reason: error.reason, detail: error.message, bytes: ctx.state.rawBody?.length ?? 0, requestId: ctx.state.requestId }, 'refused');
    throw new Problem(400, error.message, { extensions: { reason: error.reason } });
  };

  /** Records what a verified message means, then hands its effects to the gateway (a failure there only delays them). */
  const record = async (provider: 'stripe' | 'apple', eventId: string, type: string, interpretation: Interpretation) => {
    const recorded = await book.record({ provider, eventId, type }, interpretation);
    metrics.messages.inc({ provider, type, outcome: recorded.outcome });
    if (recorded.users.length > 0) await outbox.deliver(recorded.users);
    return { received: true as const, outcome: recorded.outcome, detail: recorded.detail };
  };

  /**
   * A refund or dispute names a PaymentIntent only; one the book does not know may have paid an
   * invoice (a subscription period), which Stripe says.
   */
  const resolvePaymentIntents = async (interpretation: Interpretation): Promise<Interpretation> => {
    if ('ignored' in interpretation || !stripe.canCheckout) return interpretation;
    const intents = await Promise.all(
      interpretation.intents.map(async (intent) => {
        if (intent.kind !== 'adjustment' || intent.ref !== null || !intent.paymentIntent) return intent;
        if (await repository.paymentByIntent(repository.knex, intent.paymentIntent)) return intent;
        const invoice = await stripe.invoiceOfPaymentIntent(intent.paymentIntent);
        return invoice ? { ...intent, ref: invoice } : intent;
      }),
    );
    return { ...interpretation, intents };
  };

  return [
    ...whenConfigured(
      stripe.canVerify,
      defineRoute({
        method: 'post',
        path: `${WEBHOOK_PREFIX}stripe`,
        operationId: 'stripeWebhook',
        security: [],
        summary: 'Stripe webhook events (signed)',
        description:
          'Authenticated by its Stripe-Signature (HMAC-SHA256 over `t.rawbody`, any configured secret, 300 s tolerance), checked by the stripe package on the raw body before it is parsed. Acts on checkout.session.completed and async_payment_succeeded, invoice.paid, invoice.payment_failed, customer.subscription.created/updated/deleted, charge.refunded, charge.dispute.created/closed; other verified events are recorded as ignored.',
        tags: ['webhooks'],
        responses: { ...responses, 503: { description: 'Stripe could not be asked which invoice a refunded or disputed payment paid: delivered again later' } },
        handler: async (ctx) => {
          let event;
          let interpretation;
          try {
            event = stripe.verify(ctx.state.rawBody ?? Buffer.alloc(0), ctx.get('Stripe-Signature') || undefined);
            interpretation = stripe.interpret(event);
          } catch (error) {
            if (error instanceof Refusal) return refuse(ctx, 'stripe-webhook', error);
            throw error;
          }
          try {
            interpretation = await resolvePaymentIntents(interpretation);
          } catch (error) {
            logger.error({ err: error, event: event.id }, 'Stripe could not say which invoice a PaymentIntent paid');
            throw new Problem(503, 'Stripe could not be asked about this payment; deliver the event again later');
          }
          return record('stripe', event.id, event.type, interpretation);
        },
      }),
    ),
    ...whenConfigured(
      apple.configured,
      defineRoute({
        method: 'post',
        path: `${WEBHOOK_PREFIX}apple`,
        operationId: 'appleWebhook',
        security: [],
        summary: 'App Store Server Notifications v2 (signed)',
        description:
          'The body is `{"signedPayload": "<JWS>"}`; the JWS, its transaction and its renewal info are verified with Apple\'s library against the configured roots (chain of three, Apple\'s OIDs, bundle id, environment). Acts on SUBSCRIBED, DID_RENEW, DID_FAIL_TO_RENEW, GRACE_PERIOD_EXPIRED, EXPIRED, REFUND, REVOKE, DID_CHANGE_RENEWAL_STATUS and TEST; other verified types are recorded as ignored.',
        tags: ['webhooks'],
        responses,
        handler: async (ctx) => {
          let notification;
          let interpretation;
          try {
            notification = await apple.verifyNotification(ctx.state.rawBody ?? Buffer.alloc(0));
            interpretation = apple.interpretNotification(notification);
          } catch (error) {
            if (error instanceof Refusal) return refuse(ctx, 'apple-webhook', error);
            throw error;
          }
          return record('apple', notification.notificationUUID, notification.notificationType, interpretation);
        },
      }),
    ),
  ];
}
