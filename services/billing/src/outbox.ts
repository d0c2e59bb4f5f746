import { randomUUID } from 'node:crypto';
import type { Logger } from '@tempora/kit/observability';
import type { Tier } from './domain/catalogue.ts';
import { type GatewayClient, PermanentRefusal } from './gateway-client.ts';
import type { BillingMetrics } from './metrics.ts';
import type { BillingRepository, OutboxRow } from './repository/index.ts';

export interface OutboxSettings {
  pollMs: number;
  retryMaxMs: number;
  /** How often past-due subscribers are checked for a grace that ran out. */
  lapseEveryMs: number;
}

const BATCH = 32;

/**
 * Delivers what the book decided to the gateway: grants and debits (the outbox table, each user's in
 * order) and tier changes (accounts whose tier the gateway does not have). Every call is idempotent on
 * its key, so an attempt whose answer was lost is simply made again; a gateway that is down only delays.
 */
export class Outbox {
  private readonly repository: BillingRepository;
  private readonly gateway: GatewayClient;
  private readonly metrics: BillingMetrics;
  private readonly logger: Logger;
  private readonly settings: OutboxSettings;
  private readonly lapse: () => Promise<unknown>;
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private stopped = true;
  private lastLapse = 0;
  /** Deliveries running in this process, by user: a webhook's own delivery waits for one the loop took first. */
  private readonly inFlight = new Map<string, Promise<void>>();

  constructor(
    repository: BillingRepository,
    gateway: GatewayClient,
    metrics: BillingMetrics,
    logger: Logger,
    settings: OutboxSettings,
    lapse: () => Promise<unknown>,
  ) {
    this.repository = repository;
    this.gateway = gateway;
    this.metrics = metrics;
    this.logger = logger;
    this.settings = settings;
    this.lapse = lapse;
  }

  start(): void {
    this.stopped = false;
    this.schedule(0);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.running;
  }

  private schedule(delayMs: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.running = this.pass().finally(() => this.schedule(this.settings.pollMs));
    }, delayMs);
    this.timer.unref();
  }

  private async pass(): Promise<void> {
    try {
      if (Date.now() - this.lastLapse >= this.settings.lapseEveryMs) {
        this.lastLapse = Date.now();
        await this.lapse();
      }
      await this.deliver();
    } catch (error) {
      this.logger.error({ err: error }, 'outbox pass failed');
    }
  }

  /**
   * Delivers what is due (only `userIds`' when given: a webhook's own effects, right after it committed),
   * until nothing due is left. Never throws: what fails stays due for a later pass.
   */
  async deliver(userIds?: string[]): Promise<void> {
    // A kind that had nothing due is not asked again in this call (unless waiting on the loop's work).
    let askEntries = true;
    let askTiers = true;
    for (;;) {
      const entries: OutboxRow[] = askEntries ? await this.repository.outbox.leaseDeliveries(BATCH, userIds) : [];
      const pushes: { user_id: string; tier: Tier; push_attempts: number }[] = askTiers ? await this.repository.accounts.leaseTierPushes(BATCH, userIds) : [];
      askEntries = entries.length > 0;
      askTiers = pushes.length > 0;
      if (entries.length === 0 && pushes.length === 0) {
        // What the loop had already taken for these users is theirs too, and may hold back their next
        // entry (each user's go in order): the caller answers once those are done and nothing is due.
        const running = (userIds ?? []).map((userId) => this.inFlight.get(userId)).filter((work) => work !== undefined);
        if (running.length === 0) return;
        await Promise.all(running);
        askEntries = askTiers = true;
        continue;
      }
      await Promise.all([
        ...entries.map((entry) => this.track(entry.user_id, this.deliverEntry(entry))),
        ...pushes.map((push) => this.track(push.user_id, this.pushTier(push.user_id, push.tier, push.push_attempts))),
      ]);
      // Anything that failed is due again only after its back-off, so the loop ends.
    }
  }

  private track(userId: string, work: Promise<void>): Promise<void> {
    const all = Promise.all([this.inFlight.get(userId), work]).then(() => undefined);
    this.inFlight.set(userId, all);
    void all.then(() => {
      if (this.inFlight.get(userId) === all) this.inFlight.delete(userId);
    });
    return work;
  }

  private backoff(attempts: number): Date {
    const delay = Math.min(1000 * 2 ** Math.max(0, attempts - 1), this.settings.retryMaxMs);
    return new Date(Date.now() + delay * (0.8 + Math.random() * 0.4));
  }

  private async deliverEntry(entry: OutboxRow): Promise<void> {
    try {
      const sent = entry.sent_amount ?? (await this.fixSentAmount(entry));
      const fixed = { ...entry, sent_amount: sent };
      if (sent === 0) {
        // The whole grant paid off debt: nothing reaches the ledger.
        await this.delivered(fixed, null);
        this.metrics.deliveries.inc({ kind: entry.kind, outcome: 'delivered' });
        return;
      }
      const booking = {
        userId: entry.user_id,
        amount: sent,
        idempotencyKey: entry.idempotency_key,
        operation: entry.operation,
        metadata: { provider: entry.provider, payment: entry.payment_ref },
        requestId: randomUUID(),
      };
      const booked = entry.kind === 'grant' ? await this.gateway.grant(booking) : await this.gateway.debit(booking);
      await this.delivered(fixed, booked.taken);
      this.metrics.deliveries.inc({ kind: entry.kind, outcome: 'delivered' });
      if (!booked.replayed)
        this.metrics.credits.inc({ direction: entry.kind === 'grant' ? 'granted' : 'debited', operation: entry.operation }, booked.taken ?? sent);
    } catch (error) {
      const message = (error as Error).message;
      if (error instanceof PermanentRefusal) {
        this.logger.error(
          { entry: entry.id, user: entry.user_id, key: entry.idempotency_key, error: message },
          'the gateway refused a ledger effect for good: an operator must re-sync the user',
        );
        await this.repository.outbox.deliveryFailed(entry, message, 'failed').catch(() => undefined);
        this.metrics.deliveries.inc({ kind: entry.kind, outcome: 'failed' });
        return;
      }
      this.logger.warn({ entry: entry.id, attempts: entry.attempts, error: message }, 'ledger effect not delivered yet; retrying later');
      await this.repository.outbox.deliveryFailed(entry, message, this.backoff(entry.attempts)).catch(() => undefined);
      this.metrics.deliveries.inc({ kind: entry.kind, outcome: 'retry' });
    }
  }

  /** Fixes what a grant sends, paying the user's debt from it first (once: a retry finds it fixed). */
  private async fixSentAmount(entry: OutboxRow): Promise<number> {
    const whole = await this.repository.outbox.sendWholeAmount(entry);
    if (whole !== undefined) return whole;
    return this.repository.transaction(async (tx) => {
      const row = await tx.outbox.lock(entry.id);
      // Gone: its user's account was deleted meanwhile, and nothing reaches the ledger.
      if (!row) return 0;
      if (row.sent_amount !== null) return row.sent_amount;
      let sent = entry.amount;
      if (entry.kind === 'grant') {
        const account = await tx.accounts.lock(entry.user_id);
        const paid = Math.min(Number(account.debt), entry.amount);
        if (paid > 0) {
          await tx.accounts.setDebt(entry.user_id, Number(account.debt) - paid);
          await tx.history.add({
            user_id: entry.user_id,
            kind: 'debt',
            description: `${paid} credits of this grant paid off credits a refund could not take back`,
            credits: -paid,
            provider: entry.provider,
            ref: entry.payment_ref,
            amount: null,
            currency: null,
          });
        }
        sent = entry.amount - paid;
      }
      await tx.outbox.setSentAmount(entry.id, sent);
      return sent;
    });
  }

  /** Marks a delivery done; a debit's shortfall (what the balance could not cover) becomes the user's debt. */
  private async delivered(entry: OutboxRow, taken: number | null): Promise<void> {
    if (entry.kind === 'grant') {
      await this.repository.outbox.markDelivered(entry.id, taken);
      return;
    }
    await this.repository.transaction(async (tx) => {
      if (!(await tx.outbox.markDelivered(entry.id, taken)) || taken === null) return;
      const shortfall = (entry.sent_amount ?? entry.amount) - taken;
      if (shortfall <= 0) return;
      const account = await tx.accounts.lock(entry.user_id);
      await tx.accounts.setDebt(entry.user_id, Number(account.debt) + shortfall);
      await tx.history.add({
        user_id: entry.user_id,
        kind: 'debt',
        description: `${shortfall} credits could not be taken back (already spent): they are owed from the next grants`,
        credits: null,
        provider: entry.provider,
        ref: entry.payment_ref,
        amount: null,
        currency: null,
      });
    });
  }

  private async pushTier(userId: string, tier: Tier, attempts: number): Promise<void> {
    try {
      await this.gateway.setTier(userId, tier, randomUUID());
      await this.repository.accounts.tierPushed(userId, tier);
      this.metrics.tierPushes.inc({ tier, outcome: 'pushed' });
    } catch (error) {
      const message = (error as Error).message;
      const permanent = error instanceof PermanentRefusal;
      if (permanent) this.logger.error({ user: userId, tier, error: message }, 'the gateway refused a tier change for good: an operator must re-sync the user');
      else this.logger.warn({ user: userId, tier, error: message }, 'tier change not pushed yet; retrying later');
      await this.repository.accounts.tierPushFailed(userId, message, permanent ? 'never' : this.backoff(attempts + 1)).catch(() => undefined);
      this.metrics.tierPushes.inc({ tier, outcome: permanent ? 'failed' : 'retry' });
    }
  }
}
