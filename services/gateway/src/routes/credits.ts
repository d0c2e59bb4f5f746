import { defineRoute, listEnvelope, type RouteDefinition } from '@tempora/kit/http';
import { z } from 'zod';
import { ADMIN, API_KEY, BEARER, SERVICE } from '../credentials.ts';
import type { LedgerOutcome } from '../repository/index.ts';
import { CostTableSchema, LedgerEntrySchema, Page } from '../schemas.ts';
import { ledgerView } from '../views.ts';
import { currentUser, type GatewayRouteDeps } from './context.ts';

const idempotencyKey = z
  .string()
  .trim()
  .min(1)
  .max(200)
  .meta({ description: 'a retry with the same key and the same amount changes nothing and returns the original entry' });
const GrantBody = z.object({
  user_id: z.uuid(),
  amount: z.number().int().min(1).max(10_000_000),
  reason: z.string().trim().min(1).max(500),
  idempotency_key: idempotencyKey,
});
const ChargeBody = z.object({
  user_id: z.uuid(),
  amount: z.number().int().min(1).max(10_000_000),
  operation: z.string().trim().min(1).max(100),
  idempotency_key: idempotencyKey,
});
const RefundBody = z.object({
  user_id: z.uuid(),
  idempotency_key: idempotencyKey.meta({ description: 'the key of the charge to refund' }),
  reason: z.string().max(500).default('refund'),
});
const LedgerOutcomeSchema = z.object({ entry: LedgerEntrySchema, balance: z.number().int(), replayed: z.boolean() }).meta({ id: 'LedgerOutcome' });
const BalanceSchema = z.object({ user_id: z.string(), balance: z.number().int(), currency: z.literal('credits') }).meta({ id: 'Balance' });

const outcomeView = (outcome: LedgerOutcome) => ({ entry: ledgerView(outcome.entry), balance: outcome.balance, replayed: outcome.replayed });

export function creditRoutes(deps: GatewayRouteDeps): RouteDefinition[] {
  return [...accountReadRoutes(deps), ...bookingRoutes(deps)];
}

function accountReadRoutes({ ledger }: GatewayRouteDeps): RouteDefinition[] {
  return [
    defineRoute({
      method: 'get',
      path: '/api/v1/credits/balance',
      operationId: 'getBalance',
      summary: 'Credit balance',
      tags: ['credits'],
      security: [BEARER, API_KEY],
      responses: { 200: { description: 'The balance', schema: BalanceSchema } },
      handler: async (ctx) => {
        const { userId } = currentUser(ctx);
        return { user_id: userId, balance: (await ledger.balance(userId)) ?? 0, currency: 'credits' as const };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/api/v1/credits/history',
      operationId: 'getCreditHistory',
      summary: 'Credit transactions, newest first',
      tags: ['credits'],
      security: [BEARER, API_KEY],
      query: Page,
      responses: { 200: { description: 'A page of ledger entries', schema: listEnvelope(LedgerEntrySchema, 'LedgerPage') } },
      handler: async (ctx, { query }) => {
        const { userId } = currentUser(ctx);
        const page = await ledger.history(userId, query.limit, query.offset);
        return { items: page.items.map(ledgerView), total: page.total, limit: query.limit, offset: query.offset };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/api/v1/credits/costs',
      operationId: 'getCosts',
      security: [],
      summary: 'What every chargeable operation costs',
      tags: ['credits'],
      responses: { 200: { description: 'The price list', schema: CostTableSchema } },
      handler: (ctx) => {
        ctx.set('Cache-Control', 'public, max-age=300');
        return ledger.costs();
      },
    }),
  ];
}

function bookingRoutes({ ledger }: GatewayRouteDeps): RouteDefinition[] {
  return [
    defineRoute({
      method: 'post',
      path: '/api/v1/credits/admin/grant',
      operationId: 'grantCredits',
      summary: 'Grant credits to a user (admin)',
      tags: ['admin'],
      security: [ADMIN],
      body: GrantBody,
      responses: {
        200: { description: 'Replayed: the key was used before, nothing changed', schema: LedgerOutcomeSchema },
        201: { description: 'Granted', schema: LedgerOutcomeSchema },
        404: { description: 'No such user' },
        409: { description: 'The idempotency key was used for a different grant' },
      },
      handler: async (ctx, { body }) => {
        const outcome = await ledger.adminGrant(body.user_id, body.amount, body.idempotency_key, body.reason);
        ctx.status = outcome.replayed ? 200 : 201;
        return outcomeView(outcome);
      },
    }),
    defineRoute({
      method: 'post',
      path: '/api/v1/credits/charge',
      operationId: 'chargeCredits',
      summary: 'Charge a user for an operation run by another service (service key)',
      description: "For services that spend credits on a user's behalf outside the proxy (the conductor's tool calls). Never overdraws: 402 when short.",
      tags: ['service'],
      security: [SERVICE],
      body: ChargeBody,
      responses: {
        200: { description: 'Replayed', schema: LedgerOutcomeSchema },
        201: { description: 'Charged', schema: LedgerOutcomeSchema },
        402: { description: 'Insufficient credits (required and available in the problem)' },
        404: { description: 'No such user' },
        409: { description: 'The idempotency key was used for a different charge' },
      },
      handler: async (ctx, { body }) => {
        const outcome = await ledger.serviceCharge(body.user_id, body.amount, body.idempotency_key, body.operation);
        ctx.status = outcome.replayed ? 200 : 201;
        return outcomeView(outcome);
      },
    }),
    defineRoute({
      method: 'post',
      path: '/api/v1/credits/refund',
      operationId: 'refundCredits',
      summary: 'Refund a charge made with /credits/charge (service key)',
      tags: ['service'],
      security: [SERVICE],
      body: RefundBody,
      responses: { 200: { description: 'Refunded (or refunded before)', schema: LedgerOutcomeSchema }, 404: { description: 'No such charge' } },
      handler: async (_ctx, { body }) => outcomeView(await ledger.serviceRefund(body.user_id, body.idempotency_key, body.reason)),
    }),
  ];
}
