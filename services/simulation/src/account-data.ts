import { type AccountDeletion, type ExportReader, keysetPage, UUID_POSITION } from '@tempora/kit/http';
import type { BudgetSource } from './budget-source.ts';
import type { Accounts } from './repository/index.ts';
import type { Runner } from './runner.ts';
import { runView, stepView } from './views.ts';

const SERVICE = 'simulation';
const iso = (value: Date) => new Date(value).toISOString();

/** A step's position, `<run id>/<seq>`: undefined on the kind's first page. */
function stepAfter(after: string): { runId: string; seq: number } | undefined {
  if (after === '') return undefined;
  const [runId = '', seq = ''] = after.split('/');
  return { runId, seq: Number(seq) };
}

/**
 * The account-data contract (services/kit/src/http/account-data.ts) for this service: what it holds of a
 * user is the runs the user owns (prompt, plan, result), their steps, their metered calls, their
 * idempotency keys, and the ledger of SimulationBudgets scoped to the account (`account:<user>`). Usage is
 * computed from the runs and calls, so it goes with them.
 */
export class AccountData {
  private readonly accounts: Accounts;
  private readonly runner: Runner;
  private readonly budgets: BudgetSource;

  constructor(options: { accounts: Accounts; runner: Runner; budgets: BudgetSource }) {
    this.accounts = options.accounts;
    this.runner = options.runner;
    this.budgets = options.budgets;
  }

  /**
   * Deletes the user's data. Runs in flight are ended in the same transaction (their budgets settled at what
   * they spent), then those executing in this process are aborted; on another replica the runner finds
   * the run gone at its next write or lease renewal, within a second, and writes nothing back.
   */
  async delete(userId: string): Promise<AccountDeletion> {
    const accountBudgets = this.budgets.all.filter((budget) => budget.scope === `account:${userId}`).map((budget) => budget.name);
    const { deleted, inFlight } = await this.accounts.deleteOwner(userId, accountBudgets);
    this.runner.forget(inFlight);
    return { service: SERVICE, deleted, kept: {}, notes: [] };
  }

  /** The user's data: runs, steps, calls, idempotency keys, in that order, each by its key. */
  readers(userId: string): ExportReader[] {
    const { accounts } = this;
    return [
      {
        kind: 'runs',
        after: UUID_POSITION,
        read: async (after, limit) =>
          keysetPage(
            await accounts.ownerRuns(userId, after || undefined, limit + 1),
            limit,
            (row) => row.id,
            (row) => ({ ...runView(row), plan: row.plan, result: row.result }),
          ),
      },
      {
        kind: 'steps',
        after: /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\/\d{1,9}$/i,
        read: async (after, limit) =>
          keysetPage(
            await accounts.ownerSteps(userId, stepAfter(after), limit + 1),
            limit,
            (step) => `${step.run_id}/${step.seq}`,
            (step) => ({ run_id: step.run_id, ...stepView(step) }),
          ),
      },
      {
        kind: 'calls',
        after: /^\d{1,18}$/,
        read: async (after, limit) =>
          keysetPage(
            await accounts.ownerCalls(userId, after || undefined, limit + 1),
            limit,
            (call) => call.id,
            ({ cost_micros, created_at, ...call }) => ({ ...call, cost_usd: cost_micros / 1e6, at: iso(created_at) }),
          ),
      },
      {
        kind: 'idempotency_keys',
        // Idempotency-Key values are printable ASCII (the kit's idempotencyKeyOf).
        after: /^[\x20-\x7E]{1,255}$/,
        read: async (after, limit) =>
          keysetPage(
            await accounts.ownerIdempotencyKeys(userId, after || undefined, limit + 1),
            limit,
            (row) => row.key,
            (row) => ({ key: row.key, run_id: row.run_id, created_at: iso(row.created_at) }),
          ),
      },
    ];
  }
}
