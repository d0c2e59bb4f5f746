import { ServiceClient, type ServiceReply } from '@tempora/kit/http';
import { z } from 'zod';
import type { Tier } from './domain/catalogue.ts';

/** The gateway refused for good (unknown user, a key reused for something else): retrying cannot help. */
export class PermanentRefusal extends Error {}

/** The gateway's answer to a grant or debit: what the ledger took (debits) and the balance after. */
export interface Booked {
  taken: number | null;
  balance: number;
  replayed: boolean;
}

export interface Booking {
  userId: string;
  amount: number;
  idempotencyKey: string;
  operation: string;
  metadata: Record<string, string | number | null>;
  requestId: string;
}

/** The fields of the gateway's booking (its OpenAPI `ServiceLedgerBooking`) billing reads; `taken` comes with debits. */
const Booking = z.object({ balance: z.number().int(), replayed: z.boolean(), taken: z.number().int().optional() });

/** 408 and 429 are worth another try; every other 4xx means the request itself is wrong. */
const permanent = (status: number) => status >= 400 && status < 500 && status !== 408 && status !== 429;

/** The gateway's ledger and tiers, as billing uses them: each call idempotent, so a retry is always safe. */
export class GatewayClient {
  private readonly client: ServiceClient;
  /** Each call is cut at this, all of it (connecting, the answer's head and body): the outbox's leases are sized on it. */
  private readonly timeoutMs: number;
  constructor(baseUrl: string, serviceKey: string | undefined, timeoutMs: number) {
    this.client = new ServiceClient(baseUrl, serviceKey, timeoutMs, 'the gateway');
    this.timeoutMs = timeoutMs;
  }

  grant(booking: Booking): Promise<Booked> {
    return this.book('/api/v1/credits/grant', booking);
  }

  debit(booking: Booking): Promise<Booked> {
    return this.book('/api/v1/credits/debit', booking);
  }

  async setTier(userId: string, tier: Tier, requestId: string): Promise<void> {
    const reply = await this.client.call('PUT', `/api/v1/users/${encodeURIComponent(userId)}/tier`, {
      requestId,
      json: { tier },
      signal: AbortSignal.timeout(this.timeoutMs),
    });
    this.check('tier', reply);
  }

  private async book(path: string, booking: Booking): Promise<Booked> {
    const reply = await this.client.call('POST', path, {
      requestId: booking.requestId,
      json: {
        user_id: booking.userId,
        amount: booking.amount,
        operation: booking.operation,
        idempotency_key: booking.idempotencyKey,
        metadata: booking.metadata,
      },
      signal: AbortSignal.timeout(this.timeoutMs),
    });
    this.check(path, reply);
    // An answer outside the schema throws: the booking stays in the outbox and is tried again.
    const body = reply.json(Booking);
    return { taken: body.taken ?? null, balance: body.balance, replayed: body.replayed };
  }

  private check(what: string, reply: ServiceReply): void {
    if (reply.status >= 200 && reply.status < 300) return;
    const message = `gateway ${what}: ${reply.status} ${reply.detail()}`;
    throw permanent(reply.status) ? new PermanentRefusal(message) : new Error(message);
  }
}
