import { type AccountDeletion, type ExportReader, keysetPage, oldestFirstAfter, oldestFirstParts, oldestFirstPosition, UUID_ID } from '@tempora/kit/http';
import type { BudgetSource } from './budget-source.ts';
import type { Accounts } from './repository/index.ts';
import type { Runner } from './runner.ts';
import { runView, stepView } from './views.ts';

const SERVICE = 'simulation';
const iso = (value: Date) => new Date(value).toISOString();

/** A step's position, `<time>/<run id>/<seq>`: undefined on the kind's first page. */
function stepAfter(after: string): { at: string; runId: string; seq: number } | undefined {
  const parts = oldestFirstParts(after);
  if (!parts) return undefined;
  const [runId = '', seq = ''] = parts.id.split('/');
  return { at: parts.at, runId, seq: Number(seq) };
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

  /** The user's data: runs, steps, calls, idempotency keys, in that order, each oldest first, then by its key. */
  readers(userId: string): ExportReader[] {
    const { accounts } = this;
    return [
      {
        kind: 'runs',
        after: oldestFirstAfter(UUID_ID),
        read: async (after, limit) =>
          keysetPage(
            await accounts.ownerRuns(userId, oldestFirstParts(after), limit + 1),
            limit,
            (row) => oldestFirstPosition(row.position_at, row.id),
            (row) => ({ ...runView(row), plan: row.plan, result: row.result }),
          ),
      },
      {
        kind: 'steps',
        after: oldestFirstAfter(new RegExp(`${UUID_ID.source}/\\d{1,9}`, UUID_ID.flags)),
        read: async (after, limit) =>
          keysetPage(
            await accounts.ownerSteps(userId, stepAfter(after), limit + 1),
            limit,
            (step) => oldestFirstPosition(step.position_at, `${step.run_id}/${step.seq}`),
            (step) => ({ run_id: step.run_id, ...stepView(step) }),
          ),
      },
      {
        kind: 'calls',
        after: oldestFirstAfter(/\d{1,18}/),
        read: async (after, limit) =>
          keysetPage(
            await accounts.ownerCalls(userId, oldestFirstParts(after), limit + 1),
            limit,
            (call) => oldestFirstPosition(call.position_at, call.id),
            ({ cost_micros, created_at, position_at: _position, ...call }) => ({ ...call, cost_usd: cost_micros / 1e6, at: iso(created_at) }),
          ),
      },
      {
        kind: 'idempotency_keys',
        // Idempotency-Key values are printable ASCII (the kit's idempotencyKeyOf).
        after: oldestFirstAfter(/[\x20-\x7E]{1,255}/),
        read: async (after, limit) =>
          keysetPage(
            await accounts.ownerIdempotencyKeys(userId, oldestFirstParts(after), limit + 1),
            limit,
            (row) => oldestFirstPosition(row.position_at, row.key),
            (row) => ({ key: row.key, run_id: row.run_id, created_at: iso(row.created_at) }),
          ),
      },
    ];
  }
}
