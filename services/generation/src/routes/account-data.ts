import { defineAccountDataRoutes, oldestFirstAfter, type RouteDefinition, UUID_ID } from '@tempora/kit/http';
import type { RouteDeps } from './context.ts';

/** The positions both kinds hand out: a row's creation time and its id. */
const POSITION = oldestFirstAfter(UUID_ID);

/** The account-data contract (services/kit/src/http/account-data.ts) for the generation service. */
export function accountDataRoutes({ accountData }: RouteDeps): RouteDefinition[] {
  return defineAccountDataRoutes({
    service: 'generation',
    erase: async (owner) => ({ deleted: { ...(await accountData.erase(owner)) } }),
    readers: (owner) => [
      { kind: 'timepoints', after: POSITION, read: (after, limit) => accountData.timepoints(owner, after, limit) },
      { kind: 'jobs', after: POSITION, read: (after, limit) => accountData.jobs(owner, after, limit) },
    ],
    describe: {
      deletion: {
        summary: 'Delete everything of a user (account deletion)',
        description:
          'Called by the gateway with X-Service-Key alone when an account is deleted: every scene (with its image), job and Idempotency-Key record of the user go, and the user\'s generations still running are stopped and cannot store a scene afterwards (docs/generation.md, "Account data"). Idempotent: a second call answers zero counts.',
      },
      export: {
        summary: "One page of a user's data (account export)",
        description:
          'Called by the gateway with X-Service-Key alone. Kinds in this order: `timepoints` (the full scene records, public and private, as `GET /api/v1/timepoints/{id}` answers them), then `jobs` (asynchronous generations with their request and Idempotency-Key); each oldest first, then by id. `next_cursor` is null after the last page; a cursor this service did not issue is 400.',
      },
    },
  });
}
