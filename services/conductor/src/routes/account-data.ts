import { defineAccountDataRoutes, type RouteDefinition } from '@tempora/kit/http';
import type { ConductorRouteDeps } from './context.ts';

/** The account-data contract (services/kit/src/http/account-data.ts) for the conductor. */
export function accountDataRoutes({ service }: ConductorRouteDeps): RouteDefinition[] {
  return defineAccountDataRoutes({
    service: 'conductor',
    erase: (userId) => service.deleteAccount(userId),
    readers: (userId) => service.exportReaders(userId),
    describe: {
      deletion: {
        summary: 'Delete everything of a user (account deletion)',
        description:
          "Called by the gateway with X-Service-Key alone when an account is deleted: the settings, conversations, messages, pauses and the journal of tool calls of the user go, a message at work included. Refunds the gateway had not booked yet are dropped (`pending_refunds`): the account's ledger goes with it. Idempotent: a second call answers zero counts.",
      },
      export: {
        summary: "One page of a user's data (account export)",
        description:
          'Called by the gateway with X-Service-Key alone. Kinds in this order: `settings` (as set; no item when never set), `conversations`, then `messages` (the request, its status and reply, and its `tool_calls` as the journal holds them: arguments, status, credits net of refunds, note, output); conversations and messages oldest first (`created_at`, to the microsecond), then by id. `next_cursor` is null after the last page; a cursor this service did not issue is 400.',
      },
    },
  });
}
