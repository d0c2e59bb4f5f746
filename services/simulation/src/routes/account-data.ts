import { defineAccountDataRoutes, type RouteDefinition } from '@tempora/kit/http';
import type { AccountData } from '../account-data.ts';

const who =
  'Only the service key without X-User-ID (the gateway, for the account it deletes or exports): 401 without it, 403 with X-User-ID or another credential.';

/** The account-data contract (services/kit/src/http/account-data.ts): the gateway deletes and exports an account here. */
export function accountDataRoutes(accounts: AccountData): RouteDefinition[] {
  return defineAccountDataRoutes({
    service: 'simulation',
    erase: (userId) => accounts.delete(userId),
    readers: (userId) => accounts.readers(userId),
    describe: {
      deletion: {
        summary:
          'Delete everything held of a user: runs (prompts, plans, results), steps, metered calls, idempotency keys, the ledger of budgets scoped to the account',
        description: `${who} Runs in flight are ended first (their budgets settled at what they spent) and stopped wherever they execute; nothing of them is written back. Idempotent: a second call answers zero counts.`,
      },
      export: {
        summary: "One page of a user's data: `runs`, then `steps`, `calls`, `idempotency_keys`, each oldest first, then by key",
        description: `${who} Follow \`next_cursor\` until it is null: every item comes exactly once, none is left out; a cursor this service did not issue is 400.`,
      },
    },
  });
}
