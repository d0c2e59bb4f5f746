import { defineRoute, type RouteDefinition } from '@tempora/kit/http';
import { PortalSessionSchema, SubscriptionViewSchema } from '../schemas.ts';
import { type BillingRouteDeps, callerId, SERVICE, whenConfigured } from './context.ts';

const elsewhere = {
  404: { description: 'No running plan' },
  409: { description: "An App Store plan: the problem's `manage_url` is Apple's subscription management" },
  502: { description: 'Stripe refused' },
  503: { description: 'Stripe could not be reached; try again' },
};

/** Plan management for the subscriber: cancel at period end, undo that, and Stripe's customer portal. */
export function planRoutes(deps: BillingRouteDeps): RouteDefinition[] {
  // Long on purpose: a table of routes, one block per route, each handler short.
  const { subscriptions, configured } = deps;
  // Stripe's customer portal, or a 409 pointing to Apple's settings: either channel can have sold the plan.
  const managed = configured.checkout || configured.apple;
  return [
    ...whenConfigured(
      managed,
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
        handler: (ctx) => subscriptions.setCancel(callerId(ctx), true),
      }),
    ),
    ...whenConfigured(
      managed,
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
        handler: (ctx) => subscriptions.setCancel(callerId(ctx), false),
      }),
    ),
    ...whenConfigured(
      managed,
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
          const url = await subscriptions.portal(callerId(ctx));
          ctx.status = 201;
          return { url };
        },
      }),
    ),
  ];
}
