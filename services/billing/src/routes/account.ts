import { defineRoute, Problem, pageQuery, type RouteDefinition, unprocessable } from '@tempora/kit/http';
import { z } from 'zod';
import type { Item } from '../domain/catalogue.ts';
import { ENDED_STATUSES } from '../domain/intents.ts';
import { Refusal } from '../refusal.ts';
import { BillingStateSchema, HistoryPageSchema, RecordedSchema } from '../schemas.ts';
import { historyView, subscriptionView } from '../views.ts';
import { type BillingRouteDeps, callerId, SERVICE, whenConfigured } from './context.ts';

/** A user's billing state as users see it (the operators' view adds to it). */
export async function billingState(deps: BillingRouteDeps, userId: string) {
  const [account, subscriptions, outbox] = await Promise.all([
    deps.repository.account(userId),
    deps.repository.subscriptionsOf(deps.repository.knex, userId),
    deps.repository.outboxOf(userId),
  ]);
  const graceMs = deps.config.PAST_DUE_GRACE_DAYS * 86_400_000;
  return {
    user_id: userId,
    tier: account?.tier ?? ('free' as const),
    subscriptions: subscriptions.map((row) => subscriptionView(row, graceMs)),
    debt: Number(account?.debt ?? 0),
    pending_credits: outbox
      .filter((entry) => entry.status !== 'delivered' && entry.kind === 'grant')
      .reduce((sum, entry) => sum + (entry.sent_amount ?? entry.amount), 0),
  };
}

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
  const { catalogue, repository, stripe, apple, book, outbox, metrics, logger } = deps;
  return [
    ...whenConfigured(
      stripe.canCheckout,
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
          const userId = callerId(ctx);
          const pack = body.kind === 'pack' ? catalogue.pack(body.id) : undefined;
          const plan = body.kind === 'plan' ? catalogue.plan(body.id) : undefined;
          const item: Item | undefined = pack ? { kind: 'pack', pack } : plan ? { kind: 'plan', plan } : undefined;
          if (!item) throw unprocessable(`no ${body.kind} ${body.id}`, [{ path: 'body.id', message: `not a ${body.kind} of the catalogue` }]);
          if (item.kind === 'plan') {
            const running = (await repository.subscriptionsOf(repository.knex, userId)).find((row) => !ENDED_STATUSES.has(row.status));
            if (running)
              throw new Problem(
                409,
                `a ${running.plan_id ?? ''} subscription (${running.provider} ${running.ref}) is ${running.status}: change or cancel it instead of buying another`,
              );
          }
          let session;
          try {
            session = await stripe.createCheckout(userId, item, String(ctx.state.requestId));
          } catch (error) {
            logger.error({ err: error, user: userId }, 'Stripe checkout failed');
            throw new Problem(502, 'Stripe did not create the checkout session; try again');
          }
          metrics.checkouts.inc({ kind: item.kind });
          ctx.status = 201;
          return { ...session, kind: item.kind, item_id: body.id };
        },
      }),
    ),
    ...whenConfigured(
      apple.configured,
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
        handler: async (ctx, { body }) => {
          const userId = callerId(ctx);
          try {
            const transaction = await apple.verifyTransaction(body.signed_transaction);
            if (transaction.appAccountToken && transaction.appAccountToken.toLowerCase() !== userId) {
              throw new Refusal('foreign-account', "the transaction's appAccountToken names another account");
            }
            const recorded = await book.record({ provider: 'apple', eventId: null, type: 'transaction' }, await apple.interpretPosted(transaction, userId));
            metrics.messages.inc({ provider: 'apple', type: 'transaction', outcome: recorded.outcome });
            await outbox.deliver(recorded.users);
            return { received: true as const, outcome: recorded.outcome, detail: recorded.detail };
          } catch (error) {
            if (!(error instanceof Refusal)) throw error;
            metrics.refusals.inc({ channel: 'apple-transaction', reason: error.reason });
            logger.warn({ channel: 'apple-transaction', reason: error.reason, detail: error.message, user: userId, requestId: ctx.state.requestId }, 'refused');
            throw new Problem(400, error.message, { extensions: { reason: error.reason } });
          }
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
      handler: (ctx) => billingState(deps, callerId(ctx)),
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
      handler: async (ctx, { query }) => {
        const page = await repository.history(callerId(ctx), query.limit, query.offset);
        return { items: page.items.map(historyView), total: page.total, limit: query.limit, offset: query.offset };
      },
    }),
  ];
}
