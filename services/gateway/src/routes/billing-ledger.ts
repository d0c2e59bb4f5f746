import { z } from 'zod';
import { defineRoute, type RouteDefinition, conflict, notFound } from '@tempora/kit/http';
import { SERVICE } from '../credentials.ts';
import { BillingLedger } from '../billing-ledger.ts';
import { IdempotencyConflict, UnknownUser, type LedgerOutcome } from '../repository.ts';
import { LedgerEntrySchema } from '../schemas.ts';
import { ledgerView } from '../views.ts';
import type { GatewayRouteDeps } from './context.ts';

const BookingBody = z.object({
  user_id: z.uuid(),
  amount: z.number().int().min(1).max(10_000_000),
  operation: z.string().trim().min(1).max(100).meta({ description: 'what the entry is for, e.g. billing.pack or billing.refund' }),
  idempotency_key: z.string().trim().min(1).max(200).meta({ description: 'derived from the payment provider\'s own ids: the same key never books twice' }),
  metadata: z.record(z.string(), z.union([z.string().max(500), z.number(), z.boolean(), z.null()])).optional(),
});
const BookingSchema = z
  .object({ entry: LedgerEntrySchema, balance: z.number().int(), replayed: z.boolean(), taken: z.number().int().optional() })
  .meta({ id: 'ServiceLedgerBooking' });

async function booking<T extends LedgerOutcome>(userId: string, work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    if (error instanceof UnknownUser) throw notFound(`no user ${userId}`);
    if (error instanceof IdempotencyConflict) throw conflict(error.message);
    throw error;
  }
}

/**
 * Grants and compensating debits booked by a service (the billing service's payments and refunds), each
 * idempotent on the caller's key: a retry after a lost answer books nothing more and answers the entry.
 */
export function billingLedgerRoutes(deps: GatewayRouteDeps): RouteDefinition[] {
  const { repository } = deps;
  const ledger = new BillingLedger(repository.knex);
  return [
    defineRoute({
      method: 'post',
      path: '/api/v1/credits/grant',
      operationId: 'serviceGrantCredits',
      summary: 'Grant credits for a payment (service key)',
      description: 'The billing service books what a verified payment bought. A retry with the same key and amount answers 200 with the original entry; the same key with another amount is a 409.',
      tags: ['service'],
      security: [SERVICE],
      body: BookingBody,
      responses: {
        200: { description: 'Replayed: booked before, nothing changed', schema: BookingSchema },
        201: { description: 'Granted', schema: BookingSchema },
        404: { description: 'No such user' },
        409: { description: 'The key was used for a different grant' },
      },
      handler: async (ctx, { body }) => {
        const outcome = await booking(body.user_id, () => repository.grant(body.user_id, body.amount, `service-grant:${body.idempotency_key}`, body.operation, body.metadata ?? {}));
        ctx.status = outcome.replayed ? 200 : 201;
        return { entry: ledgerView(outcome.entry), balance: outcome.balance, replayed: outcome.replayed };
      },
    }),
    defineRoute({
      method: 'post',
      path: '/api/v1/credits/debit',
      operationId: 'serviceDebitCredits',
      summary: 'Take back credits of a refunded or disputed payment (service key)',
      description: 'Takes up to `amount`: never more than the balance holds, so the balance stays at or above zero; `taken` says how much was taken. The same key books once.',
      tags: ['service'],
      security: [SERVICE],
      body: BookingBody,
      responses: {
        200: { description: 'Replayed: booked before, nothing changed', schema: BookingSchema },
        201: { description: 'Debited (taken may be less than amount)', schema: BookingSchema },
        404: { description: 'No such user' },
      },
      handler: async (ctx, { body }) => {
        const outcome = await booking(body.user_id, () => ledger.debitUpTo(body.user_id, body.amount, `service-debit:${body.idempotency_key}`, body.operation, body.metadata ?? {}));
        ctx.status = outcome.replayed ? 200 : 201;
        return { entry: ledgerView(outcome.entry), balance: outcome.balance, replayed: outcome.replayed, taken: outcome.taken };
      },
    }),
  ];
}
