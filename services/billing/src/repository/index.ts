import type { Knex } from '@tempora/kit/data';
import { Accounts } from './accounts.ts';
import { Erasures } from './erasures.ts';
import { ProviderEvents } from './events.ts';
import { History } from './history.ts';
import { OutboxEntries } from './outbox.ts';
import { Payments } from './payments.ts';
import { Subscriptions } from './subscriptions.ts';

export type { HistoryRow, OutboxRow, PaymentRow, ProviderRef, SubscriptionRow } from './rows.ts';

/**
 * Every SQL statement of billing, one part per area; nothing else in the service talks to PostgreSQL.
 * A repository from `transaction` runs all its statements in that one transaction: the book applies a
 * message with its event record, payment and subscription rows and outbox entries together.
 */
export class BillingRepository {
  readonly events: ProviderEvents;
  readonly payments: Payments;
  readonly subscriptions: Subscriptions;
  readonly accounts: Accounts;
  readonly outbox: OutboxEntries;
  readonly history: History;
  readonly erasures: Erasures;
  private readonly knex: Knex;
  private readonly leaseMs: number;

  /** `leaseMs`: how long a delivery or tier push is leased (see lease.ts). */
  constructor(knex: Knex, leaseMs: number) {
    this.knex = knex;
    this.leaseMs = leaseMs;
    this.events = new ProviderEvents(knex);
    this.payments = new Payments(knex);
    this.subscriptions = new Subscriptions(knex);
    this.accounts = new Accounts(knex, leaseMs);
    this.outbox = new OutboxEntries(knex, leaseMs);
    this.history = new History(knex);
    this.erasures = new Erasures(knex);
  }

  /** Runs `work` in one transaction, on a repository bound to it: committed when `work` resolves, rolled back when it throws. */
  async transaction<T>(work: (tx: BillingRepository) => Promise<T>): Promise<T> {
    return this.knex.transaction((trx) => work(new BillingRepository(trx, this.leaseMs)));
  }
}
