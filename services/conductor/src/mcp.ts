import type Router from '@koa/router';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { listToolsIn2020, mountStatelessMcp } from '@tempora/kit/mcp';
import { z } from 'zod';
import { type Caller, requireCaller } from './auth.ts';
import { type ConductorService, ConversationBusy, ConversationNotFound, ModelUnavailable, NothingToDecide, PausedCallNotFound } from './conductor-service.ts';
import { ConductorResponseSchema, MessageBody } from './schemas.ts';

const SUGGESTIONS = {
  input:
    "Pass `content` (1 to 4000 characters of natural language), optionally `conversation_id` (a UUID from an earlier reply), and `decision` (confirm or decline) with `pending_id` (the paused reply's `pending.id`) to answer a paused request.",
  missing: 'Leave out `conversation_id` to start a new conversation, or pass one from an earlier reply.',
  busy: "Wait for the conversation's current message to be answered, then send this one again.",
  decide:
    "Send `decision` with `pending_id` set to the `pending.id` of the conversation's latest paused reply (its GET shows it); each paused call is decided once.",
  pending: 'Use the `pending.id` of a paused reply of this conversation as `pending_id`.',
  model: 'The model was unreachable and nothing was done or charged; try again shortly.',
};

/**
 * The converse tool's arguments as the SDK is given them: every field accepted as it comes (with its JSON
 * Schema shown), so that a bad argument reaches the tool, which answers `{error, suggestion}` as the
 * graph's tools do, rather than the transport failing the call.
 */
const lenientInput = z
  .object(
    Object.fromEntries(
      Object.entries(MessageBody.shape).map(([key, field]) => {
        const { $schema: _, ...json } = z.toJSONSchema(field, { io: 'input', unrepresentable: 'any' }) as Record<string, unknown>;
        return [key, z.any().optional().meta(json)];
      }),
    ),
  )
  .meta({ required: ['content'] });

/** The output schema admits the error shape too: `{error, suggestion}` is a result, not a failure. */
const output = ConductorResponseSchema.partial().extend({ error: z.string().optional(), suggestion: z.string().optional() });

type ToolResult = { content: Array<{ type: 'text'; text: string }>; structuredContent: Record<string, unknown>; isError?: boolean };
const result = (value: object, isError = false): ToolResult => ({
  content: [{ type: 'text', text: JSON.stringify(value) }],
  structuredContent: value as Record<string, unknown>,
  ...(isError ? { isError } : {}),
});

function refusal(error: unknown): ToolResult {
  const suggestion =
    error instanceof ConversationNotFound
      ? SUGGESTIONS.missing
      : error instanceof PausedCallNotFound
        ? SUGGESTIONS.pending
        : error instanceof ConversationBusy
          ? SUGGESTIONS.busy
          : error instanceof NothingToDecide
            ? SUGGESTIONS.decide
            : error instanceof ModelUnavailable
              ? SUGGESTIONS.model
              : undefined;
  if (suggestion === undefined) throw error;
  return result({ error: (error as Error).message, suggestion }, true);
}

export function buildMcpServer(service: ConductorService, version: string, caller: Caller, requestId: string): McpServer {
  const server = new McpServer({ name: 'tempora-conductor', version }, { capabilities: { tools: {} } });
  const converse = server.registerTool(
    'converse',
    {
      description:
        "Send one natural-language request to Tempora's conductor, which searches and walks the historical graph, renders scenes and starts simulations as needed, paying for them from your credits. Returns the reply, the tools it called with their credits, and the spend. A request that needs your confirmation comes back paused: answer it with decision confirm or decline and pending_id (the paused reply's pending.id) in the same conversation.",
      inputSchema: lenientInput,
      outputSchema: output.shape,
      annotations: { readOnlyHint: false, openWorldHint: false },
    },
    async (args: unknown) => {
      const parsed = MessageBody.safeParse(args ?? {});
      if (!parsed.success) {
        return result(
          { error: parsed.error.issues.map((issue) => `${issue.path.join('.') || 'arguments'}: ${issue.message}`).join('; '), suggestion: SUGGESTIONS.input },
          true,
        );
      }
      try {
        return result(
          await service.send({
            userId: caller.userId,
            content: parsed.data.content,
            conversationId: parsed.data.conversation_id,
            decision: parsed.data.decision,
            pendingId: parsed.data.pending_id,
            requestId,
          }),
        );
      } catch (error) {
        return refusal(error);
      }
    },
  );
  listToolsIn2020(server, { converse });
  return server;
}

/**
 * Where the MCP server answers: /mcp on the conductor's own port, and its public alias, the path the
 * gateway forwards from the public host (as the graph's /api/v1/graph/mcp).
 */
export const MCP_PATHS = ['/mcp', '/api/v1/conductor/mcp'] as const;

/**
 * MCP (Streamable HTTP, stateless), for the same callers as the REST route: an MCP client sends the user's
 * access token, to the conductor or to the gateway, which forwards the user it authenticated. Requests
 * whose Host or Origin is not among `allowedHosts` are refused first.
 */
export function mountMcp(router: Router, service: ConductorService, version: string, allowedHosts: readonly string[]): void {
  for (const path of MCP_PATHS) {
    mountStatelessMcp(router, path, (ctx) => buildMcpServer(service, version, requireCaller(ctx), ctx.state.requestId), { allowedHosts });
  }
}
