import { defineRoute, linksTo, type RouteDefinition } from '@tempora/kit/http';
import { BEARER, requireCaller, SERVICE } from '../auth.ts';
import { ConductorResponseSchema, MessageBody } from '../schemas.ts';
import { asProblem, type ConductorRouteDeps } from './context.ts';

export function messageRoutes({ service }: ConductorRouteDeps): RouteDefinition[] {
  return [
    defineRoute({
      method: 'post',
      path: '/api/v1/conductor/messages',
      operationId: 'sendMessage',
      summary: 'Send a natural-language request; the conductor calls the tools it needs and answers',
      description:
        'Answers with `reply`, one `tools_called` entry per tool call (credits, running total, note) and `spend`. A request that would pass the account\'s spend ceiling, its balance, or what its autonomy allows is answered `status: paused` with `pending` (what it would do next and what it would cost); send `decision` (or "yes"/"no" as `content`) in the same conversation with `pending_id`, the paused reply\'s `pending.id`, to confirm or decline that call. A decision without it, naming another call, or naming a call already decided (a repeated or concurrent confirmation) is refused and runs and charges nothing. Every charge is booked in the gateway\'s ledger under the message id and the call\'s index, and refunded when the call fails.',
      tags: ['conductor'],
      security: [BEARER, SERVICE],
      body: MessageBody,
      responses: {
        200: {
          description: 'The reply (completed, paused or stopped by a cap)',
          schema: ConductorResponseSchema,
          links: linksTo({ id: '$response.body#/conversation_id' }, 'getConversation', 'deleteConversation'),
        },
        404: { description: 'No such conversation, or no paused call `pending_id` in it' },
        409: {
          description:
            'The conversation is answering another message, or a decision does not name the call that waits (no `pending_id`, another call, or one already decided)',
        },
        502: { description: 'The model could not be reached before anything was done' },
      },
      handler: async (ctx, { body }) => {
        const caller = requireCaller(ctx);
        try {
          return await service.send({
            userId: caller.userId,
            content: body.content,
            conversationId: body.conversation_id,
            decision: body.decision,
            pendingId: body.pending_id,
            requestId: ctx.state.requestId,
          });
        } catch (error) {
          throw asProblem(error);
        }
      },
    }),
  ];
}
