import { defineRoute, Problem, type RouteDefinition } from '@tempora/kit/http';
import { APPLE_SUBSCRIPTIONS_URL } from '../domain/erasure.ts';
import { ENDED_STATUSES } from '../domain/intents.ts';
import type { SubscriptionRow } from '../repository.ts';
import { PortalSessionSchema, SubscriptionViewSchema } from '../schemas.ts';
import { StripeFailure } from '../stripe-channel.ts';
import { subscriptionView } from '../views.ts';
import { type BillingRouteDeps, callerId, SERVICE, whenConfigured } from './context.ts';

/** An App Store plan: Apple bills it, and only the user can change it, in Apple's settings. */
const managedByApple = (row: SubscriptionRow) =>
  new Problem(409, `this ${row.plan_id ?? ''} plan was bought through the App Store: manage or cancel it in Apple's subscription management`, {
    extensions: { manage_url: APPLE_SUBSCRIPTIONS_URL },
  });

const elsewhere = {
  404: { description: 'No running plan' },
  409: { description: "An App Store plan: the problem's `manage_url` is Apple's subscription management" },
  502: { description: 'Stripe refused' },
  503: { description: 'Stripe could not be reached; try again' },
};

/** Plan management for the subscriber: cancel at period end, undo that, and Stripe's customer portal. */
export function planRoutes(deps: BillingRouteDeps): RouteDefinition[] {
  // Long on purpose: a table of routes, one block per route, each handler short.
  const { config, repository, stripe, apple, book, outbox, logger } = deps;
  const graceMs = config.PAST_DUE_GRACE_DAYS * 86_400_000;

  /** Stripe's failure as the caller's problem: 503 when trying again may help, else 502. */
  const stripeProblem = (error: unknown, userId: string): never => {
    if (!(error instanceof StripeFailure)) throw error;
    logger.error({ err: error, user: userId }, 'plan management: Stripe failed');
    throw new Problem(error.unavailable ? 503 : 502, error.unavailable ? 'Stripe could not be reached; try again' : 'Stripe refused the change');
  };

  /** The caller's running plan (the latest, should there be several), or the problem saying why there is none to act on. */
  const runningStripePlan = async (userId: string): Promise<SubscriptionRow> => {
    const running = (await repository.subscriptionsOf(repository.knex, userId)).filter((row) => !ENDED_STATUSES.has(row.status)).at(-1);
    if (!running) throw new Problem(404, 'no running plan');
    if (running.provider === 'apple') throw managedByApple(running);
    return running;
  };

  /** Sets cancel_at_period_end at Stripe, and records Stripe's answer at once (its webhook then confirms it). */
  const setCancel = async (userId: string, cancel: boolean) => {
    const plan = await runningStripePlan(userId);
    const now = new Date();
    const change = await stripe.setCancelAtPeriodEnd(plan.ref, cancel, now).catch((error: unknown) => stripeProblem(error, userId));
    const recorded = await book.record(
      { provider: 'stripe', eventId: null, type: cancel ? 'cancel' : 'resume' },
      { userId, intents: [{ ...change, userId }] },
      now,
    );
    await outbox.deliver(recorded.users);
    const row = await repository.subscription(repository.knex, 'stripe', plan.ref);
    // Gone meanwhile: the account was deleted.
    if (!row) throw new Problem(404, 'no running plan');
    return subscriptionView(row, graceMs);
  };

  const configured = stripe.canCheckout || apple.configured;
  return [
    ...whenConfigured(
      configured,
      defineRoute({
        method: 'post',
        path: '/api/v1/billing/subscription/cancel',
        operationId: 'cancelSubscription',
        summary: "Cancel the caller's plan at the end of the period paid for",
        description:
          "Sets `cancel_at_period_end` at Stripe: the plan, its tier and its credits run to the period's end, and nothing more is charged; Stripe then ends it (`customer.subscription.deleted`). Cancelling a plan already cancelling changes nothing. An App Store plan is cancelled with Apple (409 with `manage_url`).",
        tags: ['account'],
        security: [SERVICE],
        responses: { 200: { description: 'The plan, cancelling at `current_period_end`', schema: SubscriptionViewSchema }, ...elsewhere },
        handler: (ctx) => setCancel(callerId(ctx), true),
      }),
    ),
    ...whenConfigured(
      configured,
      defineRoute({
        method: 'post',
        path: '/api/v1/billing/subscription/resume',
        operationId: 'resumeSubscription',
        summary: "Undo a pending cancellation of the caller's plan",
        description:
          'Clears `cancel_at_period_end` at Stripe before the period ends: the plan renews as before. Resuming a plan that is not cancelling changes nothing. An App Store plan is resumed with Apple (409 with `manage_url`).',
        tags: ['account'],
        security: [SERVICE],
        responses: { 200: { description: 'The plan, renewing', schema: SubscriptionViewSchema }, ...elsewhere },
        handler: (ctx) => setCancel(callerId(ctx), false),
      }),
    ),
    ...whenConfigured(
      configured,
      defineRoute({
        method: 'post',
        path: '/api/v1/billing/portal',
        operationId: 'createPortalSession',
        summary: "Open Stripe's customer portal for the caller",
        description:
          "A Stripe customer-portal session for the customer of the caller's latest Stripe subscription (payment methods, invoices, plan changes as the portal is configured at Stripe); it sends the user back to `PORTAL_RETURN_URL`. Changes made there reach billing as Stripe's webhooks.",
        tags: ['account'],
        security: [SERVICE],
        responses: {
          201: { description: 'The session', schema: PortalSessionSchema },
          ...elsewhere,
          404: { description: 'No Stripe subscription: nothing to manage at Stripe' },
        },
        handler: async (ctx) => {
          const userId = callerId(ctx);
          const subscriptions = await repository.subscriptionsOf(repository.knex, userId);
          const latest = subscriptions.filter((row) => row.provider === 'stripe').at(-1);
          if (!latest) {
            const atApple = subscriptions.filter((row) => row.provider === 'apple').at(-1);
            if (atApple) throw managedByApple(atApple);
            throw new Problem(404, 'no Stripe subscription: nothing to manage at Stripe');
          }
          const url = await stripe
            .portalSession(latest.ref, config.PORTAL_RETURN_URL ?? config.CHECKOUT_CANCEL_URL ?? '')
            .catch((error: unknown) => stripeProblem(error, userId));
          ctx.status = 201;
          return { url };
        },
      }),
    ),
  ];
}
