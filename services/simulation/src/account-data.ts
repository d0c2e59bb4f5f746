import { decodeExportCursor, exportPage, type AccountDeletion, type AccountExportPage } from '@tempora/kit/http';
import type { BudgetSource } from './budget-source.ts';
import type { SimulationRepository } from './repository.ts';
import type { Runner } from './runner.ts';
import { runView, stepView } from './views.ts';

const SERVICE = 'simulation';
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const iso = (value: Date) => new Date(value).toISOString();
const NOT_OURS = 'the cursor is not one this service gave out; start again without one';

/** An export cursor that is not one this service gave out (a 400 for the route). */
export class InvalidExportCursor extends Error {
  override name = 'InvalidExportCursor';
}

/** A kind's position from a cursor: undefined on the kind's first page, the parsed position else. */
function position<T>(after: string, parse: (after: string) => T | undefined): T | undefined {
  if (after === '') return undefined;
  const parsed = parse(after);
  if (parsed === undefined) throw new InvalidExportCursor(NOT_OURS);
  return parsed;
}

/**
 * One kind of an export: reads one more than asked, so the last page of a kind says it is the last and
 * the export never ends on an empty page of it.
 */
async function keyset<T>(limit: number, read: (limit: number) => Promise<T[]>, item: (row: T) => Record<string, unknown>, key: (row: T) => string) {
  const rows = await read(limit + 1);
  const page = rows.slice(0, limit);
  return { items: page.map(item), ...(rows.length > limit ? { next: key(page.at(-1)!) } : {}) };
}

/**
 * The account-data contract (services/kit/src/http/account-data.ts) for this service: what it holds of a
 * user is the runs the user owns (prompt, plan, result), their steps, their metered calls, their
 * idempotency keys, and the ledger of SimulationBudgets scoped to the account (`account:<user>`). Usage is
 * computed from the runs and calls, so it goes with them.
 */
export class AccountData {
  private readonly repository: SimulationRepository;
  private readonly runner: Runner;
  private readonly budgets: BudgetSource;

  constructor(options: { repository: SimulationRepository; runner: Runner; budgets: BudgetSource }) {
    this.repository = options.repository;
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
    const { deleted, inFlight } = await this.repository.deleteOwner(userId, accountBudgets);
    this.runner.forget(inFlight);
    return { service: SERVICE, deleted, kept: {}, notes: [] };
  }

  /** One page of the user's data: runs, steps, calls, idempotency keys, in that order, each by its key. */
  async export(userId: string, cursor: string | undefined, limit: number): Promise<AccountExportPage> {
    const { repository } = this;
    const readers: Parameters<typeof exportPage>[1] = [
      {
        kind: 'runs',
        read: (after, size) =>
          keyset(
            size,
            (n) => repository.ownerRuns(userId, position(after, (value) => (UUID.test(value) ? value : undefined)), n),
            (row) => ({ ...runView(row), plan: row.plan, result: row.result }),
            (row) => row.id,
          ),
      },
      {
        kind: 'steps',
        read: (after, size) =>
          keyset(
            size,
            (n) =>
              repository.ownerSteps(
                userId,
                position(after, (value) => {
                  const [runId = '', seq = ''] = value.split('/', 3);
                  return UUID.test(runId) && /^\d{1,9}$/.test(seq) && value === `${runId}/${seq}` ? { runId, seq: Number(seq) } : undefined;
                }),
                n,
              ),
            (step) => ({ run_id: step.run_id, ...stepView(step) }),
            (step) => `${step.run_id}/${step.seq}`,
          ),
      },
      {
        kind: 'calls',
        read: (after, size) =>
          keyset(
            size,
            (n) => repository.ownerCalls(userId, position(after, (value) => (/^\d{1,18}$/.test(value) ? value : undefined)), n),
            ({ cost_micros, created_at, ...call }) => ({ ...call, cost_usd: cost_micros / 1e6, at: iso(created_at) }),
            (call) => call.id,
          ),
      },
      {
        kind: 'idempotency_keys',
        read: (after, size) =>
          keyset(
            size,
            (n) => repository.ownerIdempotencyKeys(userId, position(after, (value) => value), n),
            (row) => ({ key: row.key, run_id: row.run_id, created_at: iso(row.created_at) }),
            (row) => row.key,
          ),
      },
    ];
    const at = decodeExportCursor(cursor);
    if (!at || at.kind >= readers.length) throw new InvalidExportCursor(NOT_OURS);
    return exportPage(SERVICE, readers, at, limit);
  }
}
