import { createHash, randomUUID } from 'node:crypto';
import { idempotencyKeyOf, Problem } from '@tempora/kit/http';
import type { Logger } from '@tempora/kit/observability';
import type { GatewayMetrics } from '../metrics.ts';
import { type GatewayRepository, IdempotencyConflict, InsufficientCredits, type LedgerOutcome } from '../repository/index.ts';
import { type PricedOperation, priceOf } from './costs.ts';

/**
 * The ledger key of a charge a service books for a user (`/credits/charge`, `/credits/refund`, the jobs it
 * hands over): namespaced so it can never meet a proxied call's key.
 */
export const serviceChargeKey = (idempotencyKey: string) => `service:${idempotencyKey}`;

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
 * What a proxied call was charged: booked before the call is forwarded, open until the call settles it
 * once: delivered (`deliver`), refunded (`refund`), or handed to the charged-jobs follower. A settlement
 * the database refused is retried until the charge's settle-by time; past it, any replica refunds the
 * charge (`Credits.refundUnsettled`), so a replica killed mid-call or mid-retry loses no refund.
 * A call that replays an earlier one by its Idempotency-Key rides on that call's charge: it settles
 * nothing and reports nothing charged.
 */
export class CallCharge {
  readonly userId: string;
  /** The ledger entry's idempotency key (`proxy:<uuid>`, or derived from the client's Idempotency-Key). */
  readonly key: string;
  readonly price: PricedOperation;
  /** The balance right after the charge. */
  readonly balance: number;
  /** This call booked the charge (false: it replays an earlier call that did). */
  readonly owned: boolean;
  private readonly credits: Credits;
  /** Until when this replica retries a settlement the database refused. */
  private readonly retryUntil: number;
  private settling: Promise<number | undefined> | undefined;

  constructor(credits: Credits, userId: string, key: string, price: PricedOperation, outcome: LedgerOutcome) {
    this.credits = credits;
    this.userId = userId;
    this.key = key;
    this.price = price;
    this.balance = outcome.balance;
    this.owned = !outcome.replayed;
    this.retryUntil = Date.now() + credits.settleWithinMs - SETTLE_MARGIN_MS;
  }

  /** Credits this call was charged. */
  get charged(): number {
    return this.owned ? this.price.amount : 0;
  }

  /** The call delivered what was paid for: the charge stands. */
  deliver(): void {
    if (this.owned) void this.settle('capture', () => this.credits.close(this.userId, this.key).then(() => undefined));
  }

  /**
   * Books the refund, once: asking again (or after `deliver`) returns the first settlement's outcome.
   * Resolves to the balance after it, or undefined when it could not be booked now (retried meanwhile).
   */
  refund(reason: string): Promise<number | undefined> {
    if (!this.owned) return Promise.resolve(undefined);
    return this.settle('refund', () => this.credits.refund(this.userId, this.key, reason).then((outcome) => outcome?.balance));
  }

  private settle(kind: 'capture' | 'refund', book: () => Promise<number | undefined>): Promise<number | undefined> {
    this.settling ??= book().catch((error: unknown) => {
      this.credits.logger.error({ err: error, user: this.userId, charge: this.key }, `${kind} failed; retrying in the background`);
      void this.retry(kind, book);
      return undefined;
    });
    return this.settling;
  }

  /** A settlement that failed (the database was down, often the reason the call failed) is booked again with backoff. */
  private async retry(kind: 'capture' | 'refund', book: () => Promise<unknown>): Promise<void> {
    for (let wait = 500; Date.now() + wait < this.retryUntil; wait = Math.min(wait * 2, 10_000)) {
      await new Promise((resolve) => setTimeout(resolve, wait).unref());
      try {
        await book();
        this.credits.logger.info({ user: this.userId, charge: this.key }, `${kind} booked on retry`);
        return;
      } catch (error) {
        this.credits.logger.warn({ err: error, user: this.userId, charge: this.key }, `${kind} retry failed`);
      }
    }
    this.credits.logger.error({ user: this.userId, charge: this.key }, `${kind} not booked; the charge is refunded once past its settle-by time`);
  }
}

/** A replica stops retrying this long before the charge's settle-by time, when the sweep may refund it. */
const SETTLE_MARGIN_MS = 5_000;
/** Unsettled charges refunded per statement by the sweep, and how long a replica holds them meanwhile. */
const SWEEP_BATCH = 50;
const SWEEP_LEASE_MS = 60_000;

/** How long a charged call may run, and how long its settlement may be retried after. */
export interface ChargeTimes {
  /** CHARGED_CALL_MAX_MS: a charged call still running after this is cut off (and refunded unless delivered). */
  callMaxMs: number;
  /** CHARGE_SETTLE_GRACE_MS: how long a settlement the database refused is retried before the sweep refunds the charge. */
  settleGraceMs: number;
}

/**
 * Spending and giving back credits, with the metrics that count them: proxied calls (priced from their
 * body, see costs.ts) and the charges other services make through `/credits/charge`.
 */
export class Credits {
  readonly logger: Logger;
  private readonly repository: GatewayRepository;
  private readonly metrics: GatewayMetrics;

  readonly times: ChargeTimes;

  constructor(repository: GatewayRepository, metrics: GatewayMetrics, logger: Logger, times: ChargeTimes) {
    this.repository = repository;
    this.metrics = metrics;
    this.logger = logger;
    this.times = times;
  }

  /** How long after its charge a proxied call's charge may stay open before any replica refunds it. */
  get settleWithinMs(): number {
    return this.times.callMaxMs + this.times.settleGraceMs;
  }

  /**
   * Prices a chargeable call from its body's JSON (read once, by request-body.ts) and charges
   * it under a key of its own (never the client's request id, which a client could replay): 402 when the
   * balance is short.
   */
  async chargeCall(userId: string, method: string, path: string, body: unknown, metadata: object, idempotencyKey?: string): Promise<CallCharge> {
    const price = priceOf(method, path, body);
    if (!price) throw new Error(`${method} ${path} is not chargeable`);
    const key =
      idempotencyKey === undefined || !price.keyed
        ? `proxy:${randomUUID()}`
        : await this.repository.ledger.chargeKeyFor(userId, idempotencyChargeKey(method, path, idempotencyKey));
    try {
      const outcome = await this.charge(userId, price.amount, key, price.operation, metadata, this.settleWithinMs);
      // A retry may ride only on a settled charge: one still open belongs to a call not yet answered, or
      // answered but not yet refunded (a database outage delays it), which the draft answers with 409.
      if (outcome.replayed && (await this.repository.openCharges.isChargeOpen(userId, key))) {
        throw new Problem(409, 'a request with this Idempotency-Key is still being answered; retry once it is', {
          headers: { 'Retry-After': '1', 'X-Credits-Charged': '0' },
        });
      }
      return new CallCharge(this, userId, key, price, outcome);
    } catch (error) {
      if (error instanceof InsufficientCredits) throw insufficientCredits(error, price);
      if (error instanceof IdempotencyConflict)
        throw new Problem(422, 'the Idempotency-Key was used with a different request (another price)', { headers: { 'X-Credits-Charged': '0' } });
      throw error;
    }
  }

  /** Takes `amount` credits (the same key never twice); throws InsufficientCredits when the balance is short. */
  async charge(userId: string, amount: number, key: string, operation: string, metadata: object = {}, settleWithinMs?: number): Promise<LedgerOutcome> {
    const outcome = await this.repository.ledger.charge(userId, amount, key, operation, metadata, settleWithinMs);
    if (!outcome.replayed) this.metrics.creditsCharged.inc({ operation }, amount);
    return outcome;
  }

  /** Gives back the charge booked under `chargeKey` (at most once); undefined when there is no such charge. */
  async refund(userId: string, chargeKey: string, reason: string, onlyIfOpen = false): Promise<LedgerOutcome | undefined> {
    const outcome = await this.repository.ledger.refund(userId, chargeKey, reason, onlyIfOpen);
    if (outcome && !outcome.replayed) this.metrics.creditsRefunded.inc({ operation: outcome.entry.operation ?? 'unknown' }, Number(outcome.entry.amount));
    return outcome;
  }

  /** The call a charge paid for delivered, or a job follows it now: the charge is no longer open. */
  async close(userId: string, chargeKey: string): Promise<void> {
    await this.repository.openCharges.closeCharge(userId, chargeKey);
  }

  /**
   * Refunds the charges whose calls were never settled by their settle-by time: the replica that held the
   * call stopped (killed mid-call, or while it retried a settlement). Returns how many it refunded.
   */
  async refundUnsettled(): Promise<number> {
    let refunded = 0;
    for (;;) {
      const due = await this.repository.openCharges.leaseUnsettledCharges(SWEEP_LEASE_MS, SWEEP_BATCH);
      for (const charge of due) {
        const outcome = await this.refund(charge.user_id, charge.charge_key, 'the call was never settled: the gateway replica that held it stopped', true);
        if (outcome && !outcome.replayed) {
          refunded += 1;
          this.logger.warn({ user: charge.user_id, charge: charge.charge_key }, 'refunded a charge left open by a stopped replica');
        }
      }
      if (due.length < SWEEP_BATCH) return refunded;
    }
  }
}

/**
 * The ledger key of a charged call that carries an Idempotency-Key: one per user (the ledger's keys are
 * per user), method, path and client key, hashed so that any key the client chose fits. The key as the
 * services read it: the draft's structured-field string (`"k"`) and the bare form (`k`, Stripe's) are one.
 */
const idempotencyChargeKey = (method: string, path: string, idempotencyKey: string) => {
  const key = idempotencyKeyOf(idempotencyKey) ?? idempotencyKey;
  return `proxy:idem:${createHash('sha256')
    .update(`${method} ${path.replace(/\/$/, '')} ${key}`)
    .digest('hex')}`;
};
