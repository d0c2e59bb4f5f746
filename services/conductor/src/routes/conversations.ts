import { defineRoute, type RouteDefinition } from '@tempora/kit/http';
import { z } from 'zod';
import { BEARER, requireCaller, SERVICE } from '../auth.ts';
import { ConversationListSchema, ConversationSchema, Page } from '../schemas.ts';
import { asProblem, type ConductorRouteDeps } from './context.ts';

const ConversationId = z.object({ id: z.uuid() });

export function conversationRoutes({ service }: ConductorRouteDeps): RouteDefinition[] {
  return [
    defineRoute({
      method: 'get',
      path: '/api/v1/conductor/conversations',
      operationId: 'listConversations',
      summary: "The caller's conversations, most recent first",
      tags: ['conversations'],
      security: [BEARER, SERVICE],
      query: Page,
      responses: { 200: { description: 'A page of conversations', schema: ConversationListSchema } },
      handler: async (ctx, { query }) => {
        const page = await service.conversations(requireCaller(ctx).userId, query.limit, query.offset);
        return {
          items: page.items.map((row) => ({
            id: row.id,
            title: row.title,
            created_at: row.created_at.toISOString(),
            updated_at: row.updated_at.toISOString(),
          })),
          total: page.total,
          limit: query.limit,
          offset: query.offset,
        };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/api/v1/conductor/conversations/{id}',
      operationId: 'getConversation',
      summary: 'A conversation: each message, its reply and its tool calls as the ledger settled them',
      tags: ['conversations'],
      security: [BEARER, SERVICE],
      params: ConversationId,
      responses: { 200: { description: 'The conversation', schema: ConversationSchema }, 404: { description: "No such conversation of the caller's" } },
      handler: async (ctx, { params }) => {
        try {
          return await service.conversation(params.id, requireCaller(ctx).userId);
        } catch (error) {
          throw asProblem(error);
        }
      },
    }),
    defineRoute({
      method: 'delete',
      path: '/api/v1/conductor/conversations/{id}',
      operationId: 'deleteConversation',
      summary: 'Delete a conversation and its messages (the ledger keeps its entries)',
      tags: ['conversations'],
      security: [BEARER, SERVICE],
      params: ConversationId,
      responses: {
        204: { description: 'Deleted' },
        404: { description: "No such conversation of the caller's" },
        409: { description: 'It is answering a message' },
      },
      handler: async (ctx, { params }) => {
        try {
          await service.deleteConversation(params.id, requireCaller(ctx).userId);
        } catch (error) {
          throw asProblem(error);
        }
        ctx.status = 204;
      },
    }),
  ];
}
