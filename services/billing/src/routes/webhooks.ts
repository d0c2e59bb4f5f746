import { defineRoute, type RouteDefinition } from '@tempora/kit/http';
import type { Context } from 'koa';
import { RecordedSchema } from '../schemas.ts';
import { type BillingRouteDeps, refusing, whenConfigured } from './context.ts';

export const WEBHOOK_PREFIX = '/api/v1/billing/webhooks/';

const responses = {
  200: { description: 'Durably recorded (or recorded before): the provider may stop retrying', schema: RecordedSchema },
  400: { description: 'Not verifiable: nothing was recorded (counted in billing_refusals_total)' },
};

/** A webhook's body exactly as it arrived (the signature covers these bytes), and what a refusal logs of it. */
const rawBody = (ctx: Context) => ctx.state.rawBody ?? Buffer.alloc(0);
const refusalContext = (ctx: Context) => ({ bytes: ctx.state.rawBody?.length ?? 0, requestId: ctx.state.requestId });

export function webhookRoutes(deps: BillingRouteDeps): RouteDefinition[] {
  // Long on purpose: a table of routes, one block per route, each handler short.
  const { channels, configured } = deps;
  return [
    ...whenConfigured(
      configured.stripeWebhooks,
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
        handler: (ctx) =>
          refusing(deps, 'stripe-webhook', refusalContext(ctx), () => channels.stripeWebhook(rawBody(ctx), ctx.get('Stripe-Signature') || undefined)),
      }),
    ),
    ...whenConfigured(
      configured.apple,
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
        handler: (ctx) => refusing(deps, 'apple-webhook', refusalContext(ctx), () => channels.appleWebhook(rawBody(ctx))),
      }),
    ),
  ];
}
