import { conflict, notFound } from '@tempora/kit/http';
import type { ChargedJobs } from './charged-jobs.ts';
import type { GatewayConfig } from './config.ts';
import { costTable } from './domain/costs.ts';
import { type Credits, insufficientCredits, serviceChargeKey } from './domain/credits.ts';
import type { UpstreamName } from './proxy/routing.ts';
import {
  type ChargeStanding,
  type GatewayRepository,
  IdempotencyConflict,
  InsufficientCredits,
  type LedgerOutcome,
  type LedgerRow,
  UnknownUser,
} from './repository/index.ts';

export interface LedgerDeps {
  config: GatewayConfig;
  repository: GatewayRepository;
  /** Charges and refunds, with the metrics that count them. */
  credits: Credits;
  /** The charged jobs the gateway follows until they end. */
  jobs: ChargedJobs;
}

/** The ledger's refusals as problems: no such user (404), a key reused for something else (409), too few credits (402). */
async function booked<T extends LedgerOutcome>(userId: string, work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    if (error instanceof UnknownUser) throw notFound(`no user ${userId}`);
    if (error instanceof IdempotencyConflict) throw conflict(error.message);
    if (error instanceof InsufficientCredits) throw insufficientCredits(error);
    throw error;
  }
}

/**
 * Credits, independent of HTTP: a user's balance and history, the price list, and what other parties book:
 * an admin's grants, the charges and refunds services make on a user's behalf, the billing service's grants
 * and compensating debits, and the jobs a service's charge paid for, which the gateway follows and settles
 * (charged-jobs.ts). Every booking is idempotent on the caller's key.
 */
export class LedgerService {
  private readonly deps: LedgerDeps;
  private readonly repository: GatewayRepository;
  /** Charges and refunds, shared with the proxy. */
  readonly credits: Credits;

  constructor(deps: LedgerDeps) {
    this.deps = deps;
    this.repository = deps.repository;
    this.credits = deps.credits;
  }

  /** Undefined when there is no such user. */
  balance(userId: string): Promise<number | undefined> {
    return this.repository.ledger.balance(userId);
  }

  history(userId: string, limit: number, offset: number): Promise<{ items: LedgerRow[]; total: number }> {
    return this.repository.ledger.history(userId, limit, offset);
  }

  costs() {
    return costTable(this.deps.config.SIGNUP_CREDITS, this.deps.config.DEMO_CREDITS);
  }

  adminGrant(userId: string, amount: number, idempotencyKey: string, reason: string): Promise<LedgerOutcome> {
    return booked(userId, () => this.repository.ledger.grant(userId, amount, `grant:${idempotencyKey}`, 'admin.grant', { reason }));
  }

  /** A charge a service makes on the user's behalf; never overdraws. */
  serviceCharge(userId: string, amount: number, idempotencyKey: string, operation: string): Promise<LedgerOutcome> {
    return booked(userId, () => this.credits.charge(userId, amount, serviceChargeKey(idempotencyKey), operation));
  }

  /** Gives back a service's charge (at most once). */
  async serviceRefund(userId: string, idempotencyKey: string, reason: string): Promise<LedgerOutcome> {
    const outcome = await this.credits.refund(userId, serviceChargeKey(idempotencyKey), reason);
    if (!outcome) throw notFound(`no charge with idempotency key ${idempotencyKey} for user ${userId}`);
    return outcome;
  }

  /** What a verified payment bought (the billing service's). */
  serviceGrant(userId: string, amount: number, idempotencyKey: string, operation: string, metadata: object): Promise<LedgerOutcome> {
    return booked(userId, () => this.repository.ledger.grant(userId, amount, `service-grant:${idempotencyKey}`, operation, metadata));
  }

  /** Takes back up to `amount` of a refunded or disputed payment; `taken` says how much the balance held. */
  serviceDebit(userId: string, amount: number, idempotencyKey: string, operation: string, metadata: object): Promise<LedgerOutcome & { taken: number }> {
    return booked(userId, () => this.repository.ledger.debitUpTo(userId, amount, `service-debit:${idempotencyKey}`, operation, metadata));
  }

  /** How a service's charge stands. */
  async standing(userId: string, idempotencyKey: string): Promise<ChargeStanding> {
    const found = await this.repository.chargedJobs.standing(userId, serviceChargeKey(idempotencyKey));
    if (!found) throw notFound(`no charge with idempotency key ${idempotencyKey} for user ${userId}`);
    return found;
  }

  /**
   * Follows the job at `location` on `upstream` that a service's charge paid for, as the proxy's are;
   * `followed` is false for a charge already refunded, which is left alone.
   */
  async follow(userId: string, idempotencyKey: string, upstream: UpstreamName, location: string): Promise<{ followed: boolean; standing: ChargeStanding }> {
    const before = await this.standing(userId, idempotencyKey);
    if (before.state === 'refunded') return { followed: false, standing: before };
    await this.deps.jobs.follow(userId, serviceChargeKey(idempotencyKey), upstream, location);
    return { followed: true, standing: { ...before, state: 'following' } };
  }
}
