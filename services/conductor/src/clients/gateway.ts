import { ServiceClient, type ServiceReply } from '@tempora/kit/http';
import { z } from 'zod';
import { PriceBook } from '../domain/prices.ts';
import type { FollowedJob } from '../domain/tools.ts';
import { readAnswer } from './answers.ts';
import { Reuse } from './reuse.ts';

/** The ledger refused a charge: the balance is short (`available` is what it holds). */
export class InsufficientCredits extends Error {
  override name = 'InsufficientCredits';
  readonly available: number;
  constructor(required: number, available: number) {
    super(`${required} credits required, ${available} available`);
    this.available = available;
  }
}

/** The gateway could not be reached or did not book the operation; nothing can be said about the money. */
export class LedgerUnavailable extends Error {
  override name = 'LedgerUnavailable';
}

/** The fields of the gateway's answers (its OpenAPI document) the conductor reads: a ledger outcome's and a balance's are the same. */
const Shortfall = z.object({ required: z.number().int().optional(), available: z.number().int().optional() });
const Balance = z.object({ balance: z.number().int() });
const PriceList = z.object({ operations: z.array(z.object({ operation: z.string(), cost: z.number().int().min(0) })) });
/** How a charge stands at the gateway: its job still followed, refunded (and why), or standing. */
const ChargeStanding = z.object({
  state: z.enum(['following', 'refunded', 'stands']),
  charged: z.number().int(),
  refunded: z.number().int(),
  reason: z.string().nullable(),
});
export type ChargeStanding = z.output<typeof ChargeStanding>;

/** The credit ledger as the conductor uses it: every charge idempotent on its key, refundable once. */
export interface Ledger {
  /** Takes `amount` credits; a retry with the same key books nothing new. Throws InsufficientCredits or LedgerUnavailable. */
  charge(userId: string, amount: number, operation: string, key: string, requestId: string): Promise<{ balance: number }>;
  /** Gives back the charge made with `key`; undefined when there was none. Throws LedgerUnavailable. */
  refund(userId: string, key: string, reason: string, requestId: string): Promise<{ balance: number } | undefined>;
  /**
   * Hands the gateway the job the charge made with `key` paid for: it settles the charge when the job ends.
   * False when the gateway will not follow it (no such charge, or a job it cannot follow). Throws LedgerUnavailable.
   */
  follow(userId: string, key: string, job: FollowedJob, requestId: string): Promise<boolean>;
  balance(userId: string, requestId: string): Promise<number>;
}

/**
 * The gateway's service routes: the ledger (`/credits/charge`, `/credits/refund`, `/credits/follow`,
 * `/credits/standing`, `/users/{id}/balance`, with the conductor's X-Service-Key) and the published price
 * list, reused for `pricesTtlMs`. Through the kit's service client, not @tempora/client: the ledger's routes
 * are the gateway's service routes, outside the public documents the client is made from, and the published
 * document of the price list (clients/openapi/gateway.json) gives its answer no body schema, so the client,
 * failing closed, would refuse it.
 */
export class GatewayClient implements Ledger {
  private readonly service: ServiceClient;
  private readonly pricesTtlMs: number;
  private readonly priceList = new Reuse<PriceBook>(1);

  constructor(baseUrl: string, serviceKey: string | undefined, timeoutMs: number, pricesTtlMs: number) {
    this.service = new ServiceClient(baseUrl, serviceKey, timeoutMs, 'the gateway');
    this.pricesTtlMs = pricesTtlMs;
  }

  private async send(method: 'GET' | 'POST', path: string, requestId: string, json?: unknown): Promise<ServiceReply> {
    try {
      return await this.service.call(method, path, { requestId, ...(json === undefined ? {} : { json }) });
    } catch (error) {
      throw new LedgerUnavailable(`the gateway could not be reached: ${(error as Error).message}`);
    }
  }

  async charge(userId: string, amount: number, operation: string, key: string, requestId: string): Promise<{ balance: number }> {
    const reply = await this.send('POST', '/api/v1/credits/charge', requestId, { user_id: userId, amount, operation, idempotency_key: key });
    if (reply.status === 200 || reply.status === 201) return readAnswer(reply, Balance, LedgerUnavailable);
    if (reply.status === 402) {
      const problem = readAnswer(reply, Shortfall, LedgerUnavailable);
      throw new InsufficientCredits(problem.required ?? amount, problem.available ?? 0);
    }
    throw new LedgerUnavailable(`the gateway answered ${reply.status} to a charge: ${reply.detail()}`);
  }

  async refund(userId: string, key: string, reason: string, requestId: string): Promise<{ balance: number } | undefined> {
    const reply = await this.send('POST', '/api/v1/credits/refund', requestId, { user_id: userId, idempotency_key: key, reason: reason.slice(0, 500) });
    if (reply.status === 200) return readAnswer(reply, Balance, LedgerUnavailable);
    if (reply.status === 404) return undefined;
    throw new LedgerUnavailable(`the gateway answered ${reply.status} to a refund: ${reply.detail()}`);
  }

  async follow(userId: string, key: string, job: FollowedJob, requestId: string): Promise<boolean> {
    const reply = await this.send('POST', '/api/v1/credits/follow', requestId, {
      user_id: userId,
      idempotency_key: key,
      upstream: job.upstream,
      location: job.location,
    });
    if (reply.status === 200 || reply.status === 202) return true;
    if (reply.status === 404 || reply.status === 422) return false;
    throw new LedgerUnavailable(`the gateway answered ${reply.status} to following a job: ${reply.detail()}`);
  }

  /** The charge made with `key` as it stands; undefined when the gateway has none (the account is gone). */
  async standing(userId: string, key: string, requestId: string): Promise<ChargeStanding | undefined> {
    const query = new URLSearchParams({ user_id: userId, idempotency_key: key });
    const reply = await this.send('GET', `/api/v1/credits/standing?${query.toString()}`, requestId);
    if (reply.status === 200) return readAnswer(reply, ChargeStanding, LedgerUnavailable);
    if (reply.status === 404) return undefined;
    throw new LedgerUnavailable(`the gateway answered ${reply.status} for a charge's standing: ${reply.detail()}`);
  }

  async balance(userId: string, requestId: string): Promise<number> {
    const reply = await this.send('GET', `/api/v1/users/${encodeURIComponent(userId)}/balance`, requestId);
    if (reply.status !== 200) throw new LedgerUnavailable(`the gateway answered ${reply.status} for the balance: ${reply.detail()}`);
    return readAnswer(reply, Balance, LedgerUnavailable).balance;
  }

  /** The published price list, reused for `pricesTtlMs`; a failed fetch is not kept, so the next call tries again. */
  prices(requestId: string): Promise<PriceBook> {
    return this.priceList.get('prices', Date.now() + this.pricesTtlMs, async () => {
      const reply = await this.send('GET', '/api/v1/credits/costs', requestId);
      if (reply.status !== 200) throw new LedgerUnavailable(`the gateway answered ${reply.status} for its price list`);
      const { operations } = readAnswer(reply, PriceList, LedgerUnavailable);
      return new PriceBook(new Map(operations.map((entry) => [entry.operation, entry.cost])));
    });
  }
}
