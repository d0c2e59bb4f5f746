import { defineRoute, pageQuery, type RouteDefinition } from '@tempora/kit/http';
import { z } from 'zod';
import { BillingStateSchema, HistoryPageSchema, RecordedSchema } from '../schemas.ts';
import { type BillingRouteDeps, callerId, refusing, SERVICE, whenConfigured } from './context.ts';

const CheckoutBody = z.object({
  kind: z.enum(['pack', 'plan']),
  id: z.string().min(1).max(64).meta({ description: 'a pack id from /billing/packs or a plan id from /billing/plans' }),
});
const CheckoutSchema = z
  .object({
    id: z.string(),
    url: z.string().meta({ description: 'Stripe Checkout: send the buyer here' }),
    expires_at: z.number().int().nullable(),
    kind: z.enum(['pack', 'plan']),
    item_id: z.string(),
  })
  .meta({ id: 'CheckoutSession' });
const TransactionBody = z.object({ signed_transaction: z.string().min(1).max(20_000).meta({ description: 'StoreKit 2 Transaction.jwsRepresentation' }) });

export function accountRoutes(deps: BillingRouteDeps): RouteDefinition[] {
  // Long on purpose: a table of routes, one block per route, each handler short.
  const { subscriptions, channels, configured } = deps;
  return [
    ...whenConfigured(
      configured.checkout,
      defineRoute({
        method: 'post',
        path: '/api/v1/billing/checkout',
        operationId: 'createCheckout',
        summary: 'Start buying a pack or a plan (Stripe Checkout)',
        description:
          'Creates a Stripe Checkout Session for the caller and returns its URL. Credits and tier follow when Stripe reports the payment (webhook), not when this returns.',
        tags: ['purchase'],
        security: [SERVICE],
        body: CheckoutBody,
        responses: {
          201: { description: 'The session', schema: CheckoutSchema },
          409: { description: 'A plan while a subscription is running' },
          502: { description: 'Stripe refused or could not be reached' },
        },
        handler: async (ctx, { body }) => {
          const session = await subscriptions.checkout(callerId(ctx), body.kind, body.id, String(ctx.state.requestId));
          ctx.status = 201;
          return session;
        },
      }),
    ),
    ...whenConfigured(
      configured.apple,
      defineRoute({
        method: 'post',
        path: '/api/v1/billing/apple/transactions',
        operationId: 'postAppleTransaction',
        summary: 'Record an App Store purchase (StoreKit 2 signed transaction)',
        description:
          "The app posts Transaction.jwsRepresentation after a purchase (consumables produce no server notification). Verified with Apple's library against the configured roots; a transaction whose appAccountToken names another user is refused. Posting one again changes nothing.",
        tags: ['purchase'],
        security: [SERVICE],
        body: TransactionBody,
        responses: {
          200: { description: 'Recorded (or recorded before)', schema: RecordedSchema },
          400: { description: 'Not verifiable: bad signature, foreign chain, another app or environment, malformed' },
        },
        handler: (ctx, { body }) => {
          const userId = callerId(ctx);
          return refusing(deps, 'apple-transaction', { user: userId, requestId: ctx.state.requestId }, () =>
            channels.appleTransaction(userId, body.signed_transaction),
          );
        },
      }),
    ),
    defineRoute({
      method: 'get',
      path: '/api/v1/billing/subscription',
      operationId: 'getSubscription',
      summary: "The caller's tier, subscriptions and credits on their way",
      tags: ['account'],
      security: [SERVICE],
      responses: { 200: { description: 'The billing state', schema: BillingStateSchema } },
      handler: (ctx) => subscriptions.state(callerId(ctx)),
    }),
    defineRoute({
      method: 'get',
      path: '/api/v1/billing/history',
      operationId: 'getBillingHistory',
      summary: "The caller's purchases, renewals, refunds and tier changes, newest first",
      tags: ['account'],
      security: [SERVICE],
      query: pageQuery(20),
      responses: { 200: { description: 'A page of history', schema: HistoryPageSchema } },
      handler: (ctx, { query }) => subscriptions.history(callerId(ctx), query),
    }),
  ];
}
