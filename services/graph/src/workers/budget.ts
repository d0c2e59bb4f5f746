import type { WorkerSpend } from '../repository/spend.ts';

/** The UTC calendar day of `now`, as PostgreSQL's `date` reads it. */
export const utcDay = (now: Date): string => now.toISOString().slice(0, 10);

/** The start of the next UTC day: when a spent budget is available again. */
export function nextUtcDay(now: Date): Date {
  return new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() + 1));
}

export class BudgetExhausted extends Error {
  override name = 'BudgetExhausted';
  readonly until: Date;
  constructor(role: string, until: Date) {
    super(`the ${role} worker's daily budget is spent until ${until.toISOString()}`);
    this.until = until;
  }
}

/**
 * A role's spend per UTC day, kept in PostgreSQL so its replicas share one budget. A paid call is charged
 * before it is made, on an estimate, and corrected afterwards when the real cost is known, so replicas
 * racing for the last dollars cannot together spend more than the limit.
 */
export class SpendBudget {
  private readonly ledger: WorkerSpend;
  readonly role: string;
  readonly limitUsd: number;
  private readonly now: () => Date;
  /** When this process was last refused: until then it expects no charge to fit. */
  private refusedUntil: Date | undefined;

  constructor(ledger: WorkerSpend, role: string, limitUsd: number, now: () => Date = () => new Date()) {
    this.ledger = ledger;
    this.role = role;
    this.limitUsd = limitUsd;
    this.now = now;
  }

  /** Reserves `usd` for a call about to be made; throws BudgetExhausted when it does not fit today. */
  async charge(usd: number): Promise<{ day: string; usd: number }> {
    const now = this.now();
    const day = utcDay(now);
    if (usd > 0 && !(await this.ledger.charge(this.role, day, usd, this.limitUsd))) {
      this.refusedUntil = nextUtcDay(now);
      throw new BudgetExhausted(this.role, this.refusedUntil);
    }
    return { day, usd };
  }

  /** Whether a charge was refused today (by this process): the role is paused until the next UTC day. */
  exhausted(): boolean {
    return this.refusedUntil !== undefined && this.refusedUntil > this.now();
  }

  /** Replaces a reservation by the call's real cost (on the day it was charged). */
  async settle(reservation: { day: string; usd: number }, actualUsd: number): Promise<void> {
    const delta = actualUsd - reservation.usd;
    if (delta !== 0) await this.ledger.adjust(this.role, reservation.day, delta);
  }

  spentToday(): Promise<number> {
    return this.ledger.spent(this.role, utcDay(this.now()));
  }
}
