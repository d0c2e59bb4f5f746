import { defineRoute, notFound, type RouteDefinition } from '@tempora/kit/http';
import { z } from 'zod';
import { SERVICE } from '../credentials.ts';
import type { GatewayRouteDeps } from './context.ts';

const BalanceSchema = z.object({ user_id: z.string(), balance: z.number().int(), currency: z.literal('credits') }).meta({ id: 'UserBalance' });

/**
 * A user's balance for the services that spend credits on the user's behalf (the conductor reads it before
 * its paid tool calls and for its balance tool): the `/credits/charge` route answers a balance only once a
 * charge is made.
 */
export function balanceRoutes(deps: GatewayRouteDeps): RouteDefinition[] {
  return [
    defineRoute({
      method: 'get',
      path: '/api/v1/users/{user_id}/balance',
      operationId: 'getUserBalance',
      summary: "A user's credit balance (service key)",
      tags: ['service'],
      security: [SERVICE],
      params: z.object({ user_id: z.uuid() }),
      responses: { 200: { description: 'The balance', schema: BalanceSchema }, 404: { description: 'No such user' } },
      handler: async (_ctx, { params }) => {
        const balance = await deps.ledger.balance(params.user_id);
        if (balance === undefined) throw notFound(`no user ${params.user_id}`);
        return { user_id: params.user_id, balance, currency: 'credits' as const };
      },
    }),
  ];
}
