import type { Knex } from '@tempora/kit/data';
import { Accounts } from './accounts.ts';
import { BudgetLedger } from './budgets.ts';
import { Execution } from './execution.ts';
import { Runs } from './runs.ts';

export type { Accounts } from './accounts.ts';
export { type BudgetLedger, BudgetRefused, type Reservation, type UsageFilter } from './budgets.ts';
export { type NewRun, type RunRow, type RunStatus, type StepRow, TERMINAL } from './rows.ts';

/**
 * Every SQL statement of the simulation service, one part per area. Runs, steps, calls and budgets settle
 * in shared transactions, so the parts share the helpers that lock and settle the ledger (budgets.ts).
 * Nothing else in the service talks to PostgreSQL.
 */
export class SimulationRepository {
  /** What requests do with runs: create (reserving budgets), read, list, ask to cancel. */
  readonly runs: Runs;
  /** The runner's claims, leases, calls, steps and endings. */
  readonly execution: Execution;
  /** The budgets' ledger and usage. */
  readonly budgets: BudgetLedger;
  /** An account's data, deleted or exported. */
  readonly accounts: Accounts;

  constructor(knex: Knex) {
    this.runs = new Runs(knex);
    this.execution = new Execution(knex);
    this.budgets = new BudgetLedger(knex);
    this.accounts = new Accounts(knex);
  }
}
