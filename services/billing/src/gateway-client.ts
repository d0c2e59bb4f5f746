import { ServiceClient } from '@tempora/kit/http';
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

/** 408 and 429 are worth another try; every other 4xx means the request itself is wrong. */
const permanent = (status: number) => status >= 400 && status < 500 && status !== 408 && status !== 429;

/** The gateway's ledger and tiers, as billing uses them: each call idempotent, so a retry is always safe. */
export class GatewayClient {
  private readonly client: ServiceClient;
  /** Each call is cut at this, all of it (connecting, the answer's head and body): the outbox's leases are sized on it. */
  private readonly timeoutMs: number;
  constructor(baseUrl: string, serviceKey: string | undefined, timeoutMs: number) {
    this.client = new ServiceClient(baseUrl, serviceKey, timeoutMs);
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
    this.check('tier', reply.status, reply.text);
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
    this.check(path, reply.status, reply.text);
    const body = JSON.parse(reply.text) as { balance: number; replayed: boolean; taken?: number };
    return { taken: body.taken ?? null, balance: body.balance, replayed: body.replayed };
  }

  private check(what: string, status: number, text: string): void {
    if (status >= 200 && status < 300) return;
    let detail = text.slice(0, 300);
    try {
      detail = (JSON.parse(text) as { detail?: string }).detail ?? detail;
    } catch {
      // not a problem document: the text itself says it
    }
    const message = `gateway ${what}: ${status} ${detail}`;
    throw permanent(status) ? new PermanentRefusal(message) : new Error(message);
  }
}
