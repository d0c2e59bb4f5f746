import { randomUUID } from 'node:crypto';
import { Problem } from '@tempora/kit/http';
import type { Logger } from '@tempora/kit/observability';
import type { GatewayMetrics } from '../metrics.ts';
import { InsufficientCredits, type GatewayRepository, type LedgerOutcome } from '../repository.ts';
import { priceOf, type PricedOperation } from './costs.ts';

/** 402 with what the operation needs and what the balance holds; for a proxied call, also its credit fields. */
export function insufficientCredits(error: InsufficientCredits, call?: { operation: string }): Problem {
  const shape = { title: 'Insufficient credits', type: 'https://tempora.dev/problems/insufficient-credits' };
  if (!call) return new Problem(402, error.message, { ...shape, extensions: { required: error.required, available: error.available } });
  return new Problem(402, `${call.operation} costs ${error.required} credits; the balance is ${error.available}`, {
    ...shape,
    extensions: { required: error.required, available: error.available, operation: call.operation },
    headers: { 'X-Credits-Charged': '0', 'X-Balance-After': String(error.available) },
  });
}

/**
 * What a proxied call was charged: booked before the call is forwarded, and refunded at most once when
 * the call does not deliver what was paid for (the proxy says when).
 */
export class CallCharge {
  readonly userId: string;
  /** The ledger entry's idempotency key (`proxy:<uuid>`). */
  readonly key: string;
  readonly price: PricedOperation;
  /** The balance right after the charge. */
  readonly balance: number;
  private readonly credits: Credits;
  private refunding: Promise<number | undefined> | undefined;

  constructor(credits: Credits, userId: string, key: string, price: PricedOperation, balance: number) {
    this.credits = credits;
    this.userId = userId;
    this.key = key;
    this.price = price;
    this.balance = balance;
  }

  /**
   * Books the refund, once: asking again returns the first refund's outcome. Resolves to the balance after
   * it, or undefined when it could not be booked (logged: the ledger then still holds the charge).
   */
  refund(reason: string): Promise<number | undefined> {
    this.refunding ??= this.credits.refund(this.userId, this.key, reason).then(
      (outcome) => outcome?.balance,
      (error: unknown) => {
        this.credits.logger.error({ err: error, user: this.userId, charge: this.key }, 'refund failed; retrying in the background');
        void this.retryRefund(reason);
        return undefined;
      },
    );
    return this.refunding;
  }

  /**
   * A refund that failed (the database was down when the call failed, often for the same reason) is booked
   * again with backoff for REFUND_RETRY_MS: refunds are idempotent per charge, so a retry never pays twice.
   */
  private async retryRefund(reason: string): Promise<void> {
    const until = Date.now() + REFUND_RETRY_MS;
    for (let wait = 500; Date.now() < until; wait = Math.min(wait * 2, 10_000)) {
      await new Promise((resolve) => setTimeout(resolve, wait).unref());
      try {
        await this.credits.refund(this.userId, this.key, reason);
        this.credits.logger.info({ user: this.userId, charge: this.key }, 'refund booked on retry');
        return;
      } catch (error) {
        this.credits.logger.warn({ err: error, user: this.userId, charge: this.key }, 'refund retry failed');
      }
    }
    this.credits.logger.error({ user: this.userId, charge: this.key }, 'refund abandoned: the ledger keeps the charge');
  }
}

/** How long a failed refund is retried in this process. */
const REFUND_RETRY_MS = 15 * 60_000;

/**
 * Spending and giving back credits, with the metrics that count them: proxied calls (priced from their
 * body, see costs.ts) and the charges other services make through `/credits/charge`.
 */
export class Credits {
  readonly logger: Logger;
  private readonly repository: GatewayRepository;
  private readonly metrics: GatewayMetrics;

  constructor(repository: GatewayRepository, metrics: GatewayMetrics, logger: Logger) {
    this.repository = repository;
    this.metrics = metrics;
    this.logger = logger;
  }

  /**
   * Prices a chargeable call from its body (JSON; a body that is not prices at the defaults) and charges
   * it under a key of its own (never the client's request id, which a client could replay): 402 when the
   * balance is short.
   */
  async chargeCall(userId: string, method: string, path: string, body: Buffer, metadata: object): Promise<CallCharge> {
    let parsed: unknown;
    try {
      parsed = body.length > 0 ? JSON.parse(body.toString('utf8')) : {};
    } catch {
      parsed = {};
    }
    const price = priceOf(method, path, parsed);
    if (!price) throw new Error(`${method} ${path} is not chargeable`);
    const key = `proxy:${randomUUID()}`;
    try {
      const outcome = await this.charge(userId, price.amount, key, price.operation, metadata);
      return new CallCharge(this, userId, key, price, outcome.balance);
    } catch (error) {
      if (error instanceof InsufficientCredits) throw insufficientCredits(error, price);
      throw error;
    }
  }

  /** Takes `amount` credits (the same key never twice); throws InsufficientCredits when the balance is short. */
  async charge(userId: string, amount: number, key: string, operation: string, metadata: object = {}): Promise<LedgerOutcome> {
    const outcome = await this.repository.charge(userId, amount, key, operation, metadata);
    if (!outcome.replayed) this.metrics.creditsCharged.inc({ operation }, amount);
    return outcome;
  }

  /** Gives back the charge booked under `chargeKey` (at most once); undefined when there is no such charge. */
  async refund(userId: string, chargeKey: string, reason: string): Promise<LedgerOutcome | undefined> {
    const outcome = await this.repository.refund(userId, chargeKey, reason);
    if (outcome && !outcome.replayed) this.metrics.creditsRefunded.inc({ operation: outcome.entry.operation ?? 'unknown' }, Number(outcome.entry.amount));
    return outcome;
  }
}
