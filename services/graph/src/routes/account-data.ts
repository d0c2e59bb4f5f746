import {
  defineAccountDataRoutes,
  keysetPage,
  oldestFirstAfter,
  oldestFirstParts,
  oldestFirstPosition,
  type RouteDefinition,
  UUID_ID,
  unprocessable,
} from '@tempora/kit/http';
import { WORKER_ROLES } from '../config.ts';
import type { GraphRouteDeps } from './context.ts';
import { jobView } from './writes.ts';

/**
 * The user whose render jobs are meant. The other requesters a job records (a writer's or the service
 * key's principal, a worker role: routes/context.ts) are not users, and an account call never touches theirs.
 */
function userOf(userId: string): string {
  if (/^(writer|service):/.test(userId) || (WORKER_ROLES as readonly string[]).includes(userId)) {
    throw unprocessable('user_id names a writer, a service or a worker, not a user', [{ path: 'params.user_id', message: 'not a user id' }]);
  }
  return userId;
}

const notAUser = { 422: { description: 'user_id names a writer, a service or a worker role' } };

/** The account-data contract (services/kit/src/http/account-data.ts) for the graph service. */
export function accountDataRoutes(deps: GraphRouteDeps): RouteDefinition[] {
  const jobs = deps.graph.repository.renderJobs;
  return defineAccountDataRoutes({
    service: 'graph',
    erase: async (userId) => ({ deleted: { render_jobs: await jobs.deleteRequestedBy(userOf(userId)) } }),
    readers: (userId) => {
      const user = userOf(userId);
      return [
        {
          kind: 'render_jobs',
          after: oldestFirstAfter(UUID_ID),
          read: async (after, limit) => {
            const rows = await jobs.requestedBy(user, oldestFirstParts(after), limit + 1);
            return keysetPage(rows, limit, (job) => oldestFirstPosition(job.position_at, job.id), jobView);
          },
        },
      ];
    },
    describe: {
      deletion: {
        summary: 'Delete everything of a user (account deletion)',
        description:
          'Called by the gateway with X-Service-Key alone when an account is deleted: every render job the user asked for goes, whatever its state. The moments of the graph are public history, not anyone\'s personal data, and stay (docs/graph.md, "Account data"). Idempotent: a second call answers zero counts.',
      },
      export: {
        summary: "One page of a user's data (account export)",
        description:
          'Called by the gateway with X-Service-Key alone. One kind, `render_jobs`: the jobs the user asked for, as `GET /api/v1/graph/jobs/{id}` answers them, oldest first, then by id. `next_cursor` is null after the last page; a cursor this service did not issue is 400.',
      },
    },
    extraResponses: { deletion: notAUser, export: notAUser },
  });
}
