import { defineRoute, type RouteDefinition } from '@tempora/kit/http';
import { z } from 'zod';
import { SERVICE } from '../credentials.ts';
import { LedgerEntrySchema } from '../schemas.ts';
import { ledgerView } from '../views.ts';
import type { GatewayRouteDeps } from './context.ts';

const BookingBody = z.object({
  user_id: z.uuid(),
  amount: z.number().int().min(1).max(10_000_000),
  operation: z.string().trim().min(1).max(100).meta({ description: 'what the entry is for, e.g. billing.pack or billing.refund' }),
  idempotency_key: z.string().trim().min(1).max(200).meta({ description: "derived from the payment provider's own ids: the same key never books twice" }),
  metadata: z.record(z.string(), z.union([z.string().max(500), z.number(), z.boolean(), z.null()])).optional(),
});
const BookingSchema = z
  .object({ entry: LedgerEntrySchema, balance: z.number().int(), replayed: z.boolean(), taken: z.number().int().optional() })
  .meta({ id: 'ServiceLedgerBooking' });

/** A service charge's key as the service gave it to `/credits/charge`. */
const ServiceChargeKey = z.string().trim().min(1).max(200).meta({ description: 'the idempotency key the charge was made with (`/credits/charge`)' });
/** A job's resource on its upstream: a path under /api/v1/, no query, no dot segments, nothing to escape. */
const JobLocation = z
  .string()
  .max(500)
  .regex(/^\/api\/v1(\/(?!\.{1,2}(\/|$))[A-Za-z0-9_~.-]+)+$/, 'a path under /api/v1/ on the upstream, e.g. /api/v1/simulations/{id}')
  .meta({ description: "the job's resource on its upstream, which answers its `status` (and `progress.steps_done`)" });
const FollowBody = z.object({
  user_id: z.uuid(),
  idempotency_key: ServiceChargeKey,
  upstream: z.enum(['simulation', 'generation']).meta({ description: 'the service running the job' }),
  location: JobLocation,
});
const StandingQuery = z.object({ user_id: z.uuid(), idempotency_key: ServiceChargeKey });
const ChargeStandingSchema = z
  .object({
    state: z
      .enum(['following', 'refunded', 'stands'])
      .meta({ description: 'following: its job has not ended; refunded: given back (`reason` says why); stands: delivered, or never followed' }),
    charged: z.number().int(),
    refunded: z.number().int(),
    reason: z.string().nullable(),
  })
  .meta({ id: 'ChargeStanding' });

/**
 * Grants and compensating debits booked by a service (the billing service's payments and refunds), each
 * idempotent on the caller's key: a retry after a lost answer books nothing more and answers the entry;
 * and the jobs a service's charges paid for, which the gateway follows and settles (charged-jobs.ts).
 */
export function billingLedgerRoutes(deps: GatewayRouteDeps): RouteDefinition[] {
  return [...paymentBookingRoutes(deps), ...chargedJobRoutes(deps)];
}

function paymentBookingRoutes({ ledger }: GatewayRouteDeps): RouteDefinition[] {
  return [
    defineRoute({
      method: 'post',
      path: '/api/v1/credits/grant',
      operationId: 'serviceGrantCredits',
      summary: 'Grant credits for a payment (service key)',
      description:
        'The billing service books what a verified payment bought. A retry with the same key and amount answers 200 with the original entry; the same key with another amount is a 409.',
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
        const outcome = await ledger.serviceGrant(body.user_id, body.amount, body.idempotency_key, body.operation, body.metadata ?? {});
        ctx.status = outcome.replayed ? 200 : 201;
        return { entry: ledgerView(outcome.entry), balance: outcome.balance, replayed: outcome.replayed };
      },
    }),
    defineRoute({
      method: 'post',
      path: '/api/v1/credits/debit',
      operationId: 'serviceDebitCredits',
      summary: 'Take back credits of a refunded or disputed payment (service key)',
      description:
        'Takes up to `amount`: never more than the balance holds, so the balance stays at or above zero; `taken` says how much was taken. The same key books once.',
      tags: ['service'],
      security: [SERVICE],
      body: BookingBody,
      responses: {
        200: { description: 'Replayed: booked before, nothing changed', schema: BookingSchema },
        201: { description: 'Debited (taken may be less than amount)', schema: BookingSchema },
        404: { description: 'No such user' },
      },
      handler: async (ctx, { body }) => {
        const outcome = await ledger.serviceDebit(body.user_id, body.amount, body.idempotency_key, body.operation, body.metadata ?? {});
        ctx.status = outcome.replayed ? 200 : 201;
        return { entry: ledgerView(outcome.entry), balance: outcome.balance, replayed: outcome.replayed, taken: outcome.taken };
      },
    }),
  ];
}

function chargedJobRoutes({ ledger }: GatewayRouteDeps): RouteDefinition[] {
  return [
    defineRoute({
      method: 'post',
      path: '/api/v1/credits/follow',
      operationId: 'followChargedJob',
      summary: 'Hand the gateway the job a service charge paid for (service key)',
      description:
        "A service that charged a call through `/credits/charge` and started a job with it (the conductor's `start_simulation`) names the job here; the gateway then follows it as it follows the jobs of proxied calls, and refunds the charge when the job fails, or is stopped or cancelled before it delivered anything. So one rule settles every charged job, whichever way it was started. Idempotent. A charge already refunded is not followed (200).",
      tags: ['service'],
      security: [SERVICE],
      body: FollowBody,
      responses: {
        200: { description: 'Already refunded: nothing to follow', schema: ChargeStandingSchema },
        202: { description: 'Followed until the job ends', schema: ChargeStandingSchema },
        404: { description: 'No such charge' },
      },
      handler: async (ctx, { body }) => {
        const { followed, standing } = await ledger.follow(body.user_id, body.idempotency_key, body.upstream, body.location);
        if (followed) ctx.status = 202;
        return standing;
      },
    }),
    defineRoute({
      method: 'get',
      path: '/api/v1/credits/standing',
      operationId: 'getChargeStanding',
      summary: 'How a service charge stands: its job followed, refunded, or standing (service key)',
      tags: ['service'],
      security: [SERVICE],
      query: StandingQuery,
      responses: { 200: { description: 'The charge as it stands', schema: ChargeStandingSchema }, 404: { description: 'No such charge' } },
      handler: (_ctx, { query }) => ledger.standing(query.user_id, query.idempotency_key),
    }),
  ];
}
