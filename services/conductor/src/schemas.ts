import { pageQuery } from '@tempora/kit/http';
import { z } from 'zod';
import { decisionIn } from './domain/decision.ts';

/** Request and response shapes: the routes validate and document with these, the MCP tool and the tests read them. */

export const MessageBody = z
  .object({
    content: z
      .string()
      .trim()
      .min(1)
      .max(4000)
      .meta({ description: 'the request in natural language; in a conversation with a paused request, "yes" or "no" alone confirms or declines it' }),
    conversation_id: z.uuid().optional().meta({ description: 'continue this conversation (a follow-up may refer to what came before); omit to start one' }),
    decision: z.enum(['confirm', 'decline']).optional().meta({
      description:
        "the answer to the conversation's paused request: confirm runs the call it waits on, decline skips it; needs `conversation_id` and `pending_id`",
    }),
    pending_id: z.uuid().optional().meta({
      description:
        'the paused call this decision answers: the `pending.id` of the reply that paused. Required with `decision` (or a "yes"/"no" `content`); a decision naming any other call, or a call already decided, is refused and runs nothing',
    }),
  })
  .refine((body) => body.decision === undefined || body.conversation_id !== undefined, {
    message: 'a decision answers a paused request: send it with the conversation_id of that request',
    path: ['decision'],
  })
  .refine((body) => body.decision === undefined || body.pending_id !== undefined, {
    message: "a decision answers one paused call: send the paused reply's pending.id as pending_id",
    path: ['pending_id'],
  })
  .refine((body) => body.pending_id === undefined || body.conversation_id !== undefined, {
    message: 'pending_id names a call of a conversation: send it with that conversation_id',
    path: ['pending_id'],
  })
  .refine((body) => body.pending_id === undefined || body.decision !== undefined || decisionIn(body.content) !== undefined, {
    message: 'pending_id comes with a decision: send decision confirm or decline (or "yes"/"no" as content)',
    path: ['pending_id'],
  })
  .meta({ id: 'ConductorMessage' });

const CalledToolSchema = z.object({
  index: z.number().int().meta({ description: "the call's position in the request; with the message id, its ledger idempotency key" }),
  tool: z.string(),
  credits: z.number().int().meta({ description: 'credits spent by this call, net of a refund' }),
  running_total: z.number().int().meta({ description: "the request's spend after this call" }),
  note: z.string(),
  status: z.enum(['ok', 'failed', 'invalid']),
  arguments: z.record(z.string(), z.unknown()),
  output: z.record(z.string(), z.unknown()).nullable(),
});

export const ConductorResponseSchema = z
  .object({
    message_id: z.uuid(),
    conversation_id: z.uuid(),
    status: z.enum(['completed', 'paused', 'stopped']),
    reply: z.string(),
    tools_called: z.array(CalledToolSchema),
    spend: z.object({
      credits_total: z.number().int().meta({ description: 'credits spent by the calls in this response' }),
      running_total: z.number().int().meta({ description: 'credits spent by the request so far (across a pause and its confirmation)' }),
      ceiling: z.number().int(),
    }),
    pending: z
      .object({
        id: z.uuid().meta({ description: 'this paused call: send it as `pending_id` with the decision; each pause has its own, and each can be decided once' }),
        index: z.number().int(),
        tool: z.string(),
        action: z.string(),
        credits: z.number().int(),
        operation: z.string(),
        reason: z.enum(['autonomy', 'ceiling', 'balance']),
        running_total_after: z.number().int(),
        ceiling: z.number().int(),
        available: z.number().int().optional(),
      })
      .nullable()
      .meta({ description: 'what a paused request would do next and what it would cost' }),
    stopped_by: z.enum(['step_cap', 'token_cap', 'model_error']).nullable(),
    decision: z.enum(['confirm', 'decline']).nullable(),
    model: z.object({ provider: z.string(), model: z.string(), offline: z.boolean() }),
    usage: z.object({ steps: z.number().int(), tokens: z.number().int() }),
  })
  .meta({ id: 'ConductorResponse' });

export const ConversationSchema = z
  .object({
    id: z.uuid(),
    title: z.string(),
    created_at: z.string(),
    updated_at: z.string(),
    messages: z.array(
      z.object({
        id: z.uuid(),
        content: z.string(),
        status: z.string(),
        reply: z.string().nullable(),
        created_at: z.string(),
        tools_called: z.array(
          z.object({ index: z.number().int(), tool: z.string(), credits: z.number().int(), note: z.string(), status: z.string(), refund_pending: z.boolean() }),
        ),
        pending: z.unknown(),
      }),
    ),
  })
  .meta({ id: 'Conversation' });

export const ConversationListSchema = z
  .object({
    items: z.array(z.object({ id: z.uuid(), title: z.string(), created_at: z.string(), updated_at: z.string() })),
    total: z.number().int(),
    limit: z.number().int(),
    offset: z.number().int(),
  })
  .meta({ id: 'ConversationList' });

export const Page = pageQuery();
