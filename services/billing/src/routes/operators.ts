import { defineRoute, type RouteDefinition } from '@tempora/kit/http';
import { z } from 'zod';
import { OperatorStateSchema } from '../schemas.ts';
import { ADMIN, type BillingRouteDeps, refuseUsers, SERVICE } from './context.ts';

const UserParams = z.object({ user_id: z.uuid() });

export function operatorRoutes(deps: BillingRouteDeps): RouteDefinition[] {
  const { operators } = deps;
  return [
    defineRoute({
      method: 'get',
      path: '/api/v1/billing/users/{user_id}',
      operationId: 'getUserBilling',
      summary: "A user's billing state, with payments and ledger deliveries (service key, admin)",
      tags: ['operators'],
      security: [SERVICE, ADMIN],
      params: UserParams,
      responses: { 200: { description: 'The state', schema: OperatorStateSchema } },
      handler: (ctx, { params }) => {
        refuseUsers(ctx);
        return operators.state(params.user_id);
      },
    }),
    defineRoute({
      method: 'post',
      path: '/api/v1/billing/users/{user_id}/resync',
      operationId: 'resyncUserBilling',
      summary: 'Re-sync a user with Stripe and the gateway (service key, admin)',
      description:
        "Reads each of the user's Stripe subscriptions from Stripe (events that never arrived are made good), puts deliveries the gateway refused for good back in the queue, sends the tier again and delivers what is due. Answers the state afterwards.",
      tags: ['operators'],
      security: [SERVICE, ADMIN],
      params: UserParams,
      responses: { 200: { description: 'The state after the re-sync', schema: OperatorStateSchema }, 502: { description: 'Stripe could not be read' } },
      handler: (ctx, { params }) => {
        refuseUsers(ctx);
        return operators.resync(params.user_id);
      },
    }),
  ];
}
