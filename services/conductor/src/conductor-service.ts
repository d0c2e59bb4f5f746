// Over 400 lines: conversations, settlement of refunds and the account's data are one service's
// application layer; splitting it per area goes with issue 30's one shape for every service.
import { randomUUID } from 'node:crypto';
import { type AccountDeletion, type ExportReader, keysetPage, UUID_POSITION } from '@tempora/kit/http';
import type { Logger } from '@tempora/kit/observability';
import type { ChatMessage } from '@tempora/kit/providers';
import { z } from 'zod';
import type { GatewayClient } from './clients/gateway.ts';
import type { GraphMcp } from './clients/graph-mcp.ts';
import { type CallRecord, type Caps, Conductor, chargeKey, type RunOutcome, type RunState } from './domain/conductor.ts';
import { type Decision, decisionIn } from './domain/decision.ts';
import { graphTools } from './domain/graph-tools.ts';
import { offlinePlanner, type PlannerMemory } from './domain/planner.ts';
import { composeReply, systemPrompt } from './domain/reply.ts';
import type { ConductorSettings, SettingsPatch } from './domain/settings.ts';
import type { ConductorTool } from './domain/tools.ts';
import type { ConductorRepository, MessageRow, ToolCallRow } from './repository.ts';

export class ConversationNotFound extends Error {
  override name = 'ConversationNotFound';
}
/** The conversation is answering another message. */
export class ConversationBusy extends Error {
  override name = 'ConversationBusy';
}
/** A confirmation or refusal came that names no paused call, or one that no longer waits for a decision. */
export class NothingToDecide extends Error {
  override name = 'NothingToDecide';
}
/** A decision named a paused call the conversation never had. */
export class PausedCallNotFound extends Error {
  override name = 'PausedCallNotFound';
}
/** The model failed before the request did anything. */
export class ModelUnavailable extends Error {
  override name = 'ModelUnavailable';
}

export interface MessageInput {
  userId: string;
  content: string;
  conversationId?: string | undefined;
  decision?: Decision | undefined;
  /** The paused call the decision answers (the `pending.id` its sender was shown). */
  pendingId?: string | undefined;
  requestId: string;
}

/** One entry of `tools_called`. */
export interface CalledTool {
  index: number;
  tool: string;
  credits: number;
  running_total: number;
  note: string;
  status: CallRecord['status'];
  arguments: Record<string, unknown>;
  output: Record<string, unknown> | null;
}

export interface ConductorResponse {
  message_id: string;
  conversation_id: string;
  status: RunOutcome['status'];
  reply: string;
  tools_called: CalledTool[];
  spend: { credits_total: number; running_total: number; ceiling: number };
  pending: {
    id: string;
    index: number;
    tool: string;
    action: string;
    credits: number;
    operation: string;
    reason: string;
    running_total_after: number;
    ceiling: number;
    available?: number;
  } | null;
  stopped_by: RunOutcome['stopped_by'] | null;
  decision: Decision | null;
  model: { provider: string; model: string; offline: boolean };
  usage: { steps: number; tokens: number };
}

const HISTORY_MESSAGES = 10;

/** The conductor's users are the gateway's, named by UUID: any other id holds nothing here. */
const isUserId = (id: string) => z.uuid().safeParse(id).success;

const iso = (value: Date | string) => (value instanceof Date ? value.toISOString() : value);

/** A conversation held for one message (`holder`, the claim's token), until its answer is stored. */
interface Claim {
  conversationId: string;
  holder: string;
  released: boolean;
}

/** Earlier messages as the model sees them: the request, then the reply and the tools it used. */
function historyMessages(rows: MessageRow[], calls: ToolCallRow[]): ChatMessage[] {
  return rows.flatMap((row): ChatMessage[] => {
    const used = calls.filter((call) => call.message_id === row.id && call.status === 'ok');
    const tools = used.length ? `\n[tools used: ${used.map((call) => `${call.tool}: ${call.note}`).join('; ')}]` : '';
    return [
      { role: 'user', content: row.content },
      { role: 'assistant', content: `${row.reply ?? ''}${tools}` },
    ];
  });
}

/** The parts of a call's recorded output that earlier requests leave to refer back to. */
const RecordedMoment = z.object({ path: z.string().min(1), event_name: z.string(), year: z.number() });
const RecordedOutput = z.object({
  items: z.array(z.unknown()).optional(),
  id: z.string().optional(),
});

/** What earlier requests leave to refer back to: the latest moment found and simulation started. */
function memoryOf(calls: ToolCallRow[]): PlannerMemory {
  const memory: PlannerMemory = {};
  for (const call of calls) {
    if (call.status !== 'ok' || !call.output) continue;
    const output = RecordedOutput.safeParse(call.output);
    if (!output.success) continue;
    const first = call.tool === 'graph_search' ? output.data.items?.[0] : call.tool === 'graph_moment' ? call.output : undefined;
    const moment = RecordedMoment.safeParse(first);
    if (moment.success) memory.moment = moment.data;
    if (call.tool === 'start_simulation' && output.data.id) memory.simulation = output.data.id;
  }
  return memory;
}

export interface ConductorServiceDeps {
  repository: ConductorRepository;
  conductor: Conductor;
  gateway: GatewayClient;
  graph: GraphMcp;
  /** The tools besides the graph's: scenes, simulations, balance. */
  tools: ConductorTool[];
  caps: Caps;
  staleMs: number;
  logger: Logger;
  /** Counts each message by how it ended (metrics). */
  onMessage?(status: string): void;
}

/**
 * A user's messages to the conductor: conversations (one message at work in each), pauses and their
 * confirmation, the stored replies, and the account's settings. Knows nothing of HTTP or MCP.
 */
export class ConductorService {
  private readonly deps: ConductorServiceDeps;

  constructor(deps: ConductorServiceDeps) {
    this.deps = deps;
  }

  settings(userId: string): Promise<ConductorSettings> {
    return this.deps.repository.settings(userId);
  }

  patchSettings(userId: string, patch: SettingsPatch): Promise<ConductorSettings> {
    return this.deps.repository.patchSettings(userId, patch);
  }

  /** The graph's tools (as its MCP server lists them) and the others; without the graph, the others alone. */
  private async tools(requestId: string): Promise<ConductorTool[]> {
    try {
      return [...graphTools(await this.deps.graph.tools(requestId)), ...this.deps.tools];
    } catch (error) {
      this.deps.logger.warn({ err: error, requestId }, "the graph's tools could not be listed; answering without them");
      return this.deps.tools;
    }
  }

  async send(input: MessageInput): Promise<ConductorResponse> {
    const { repository } = this.deps;
    const messageId = randomUUID();
    const fresh = { id: messageId, content: input.content, state: Conductor.initialState(input.content) };
    if (!input.conversationId) {
      const claim: Claim = { conversationId: randomUUID(), holder: messageId, released: false };
      const [settings] = await Promise.all([
        repository.settings(input.userId),
        repository.startConversation(claim.conversationId, { id: messageId, user_id: input.userId, content: input.content }),
      ]);
      try {
        return await this.answer(input, claim, fresh, settings, undefined, false);
      } finally {
        if (!claim.released) await repository.releaseConversation(claim.conversationId, messageId);
      }
    }
    const claim: Claim = { conversationId: input.conversationId, holder: messageId, released: false };
    const [settings, claimed] = await Promise.all([
      repository.settings(input.userId),
      repository.claimConversation(claim.conversationId, input.userId, messageId, this.deps.staleMs),
    ]);
    if (claimed === 'missing') throw new ConversationNotFound(`no conversation ${claim.conversationId}`);
    if (claimed === 'busy') throw new ConversationBusy(`conversation ${claim.conversationId} is answering another message; send this one when it is done`);
    try {
      const paused = await repository.pausedMessage(claim.conversationId);
      const decision = input.decision ?? (paused || input.pendingId ? decisionIn(input.content) : undefined);
      if (decision) {
        const resumed = await this.claimPause(claim.conversationId, input.pendingId, decision);
        return await this.answer(input, claim, { id: resumed.id, content: resumed.content, state: resumed.state! }, settings, decision, true);
      }
      // A new request while one is paused leaves the paused one declined.
      if (paused) await repository.supersedePaused(paused.id);
      await repository.insertMessage({
        id: messageId,
        conversation_id: claim.conversationId,
        user_id: input.userId,
        content: input.content,
        status: 'running',
      });
      return await this.answer(input, claim, fresh, settings, undefined, true);
    } finally {
      if (!claim.released) await repository.releaseConversation(claim.conversationId, messageId);
    }
  }

  /**
   * The paused message a decision resumes, claimed for it: only a decision naming the call that waits
   * (its pause's id) gets it, and only once, so a repeated or stale "yes" never approves a call its
   * sender was not shown.
   */
  private async claimPause(conversationId: string, pendingId: string | undefined, decision: Decision): Promise<MessageRow> {
    if (!pendingId) throw new NothingToDecide("a decision names the paused call it answers: send the paused reply's pending.id as pending_id; nothing was run");
    const claimed = await this.deps.repository.claimPause(conversationId, pendingId, decision);
    if (claimed.message) return claimed.message;
    if (!claimed.state) throw new PausedCallNotFound(`no paused call ${pendingId} in conversation ${conversationId}`);
    throw new NothingToDecide(`call ${pendingId} is not waiting for a decision (it was ${claimed.state}); nothing was run or charged`);
  }

  private async answer(
    input: MessageInput,
    claim: Claim,
    message: { id: string; content: string; state: RunState },
    settings: ConductorSettings,
    decision: Decision | undefined,
    continued: boolean,
  ): Promise<ConductorResponse> {
    const { repository, conductor, caps } = this.deps;
    const { conversationId } = claim;
    const earlier = continued
      ? (await repository.history(conversationId, HISTORY_MESSAGES + 1)).filter((row) => row.id !== message.id).slice(-HISTORY_MESSAGES)
      : [];
    const earlierCalls = await repository.toolCallsOf(earlier.map((row) => row.id));
    const [tools, prices] = await Promise.all([this.tools(input.requestId), this.deps.gateway.prices(input.requestId).catch(() => undefined)]);
    const graph = this.deps.graph.session(input.userId, input.requestId);
    const offline = conductor.model.kind === 'offline';
    let outcome: RunOutcome;
    try {
      outcome = await conductor.run(
        {
          messageId: message.id,
          userId: input.userId,
          requestId: input.requestId,
          settings,
          tools,
          system: systemPrompt(settings, tools, prices),
          history: historyMessages(earlier, earlierCalls),
          graph,
          journal: repository.journal(message.id, input.userId),
          signal: AbortSignal.timeout(this.deps.staleMs),
          ...(offline ? { plan: offlinePlanner(message.content, memoryOf(earlierCalls), settings.verbosity) } : {}),
        },
        message.state,
        decision,
      );
    } catch (error) {
      await repository.finishMessage(message.id, { status: 'failed', reply: '', response: {}, state: null });
      throw error;
    }
    const reply = composeReply(outcome, settings, caps);
    // Each pause gets its own id, so a decision can only answer the pause its sender was shown.
    const pause = outcome.pause ? { id: randomUUID(), index: outcome.pause.index } : undefined;
    const response = this.view(message.id, conversationId, outcome, reply, settings, decision, pause?.id);
    const nothingDone = outcome.stopped_by === 'model_error' && outcome.state.next_index === 0;
    await repository.finishAndRelease(
      message.id,
      { status: nothingDone ? 'failed' : outcome.status, reply, response, state: outcome.status === 'paused' ? outcome.state : null },
      conversationId,
      claim.holder,
      pause,
    );
    claim.released = true;
    this.deps.onMessage?.(nothingDone ? 'failed' : outcome.status);
    if (nothingDone) throw new ModelUnavailable(`the model could not be reached: ${outcome.text}`);
    return response;
  }

  private view(
    messageId: string,
    conversationId: string,
    outcome: RunOutcome,
    reply: string,
    settings: ConductorSettings,
    decision: Decision | undefined,
    pauseId: string | undefined,
  ): ConductorResponse {
    let total = outcome.started_total;
    const tools_called = outcome.calls.map((call) => {
      total += call.credits;
      return {
        index: call.index,
        tool: call.tool,
        credits: call.credits,
        running_total: total,
        note: call.note,
        status: call.status,
        arguments: call.arguments,
        output: call.output,
      };
    });
    const { pause } = outcome;
    const model = this.deps.conductor.model;
    return {
      message_id: messageId,
      conversation_id: conversationId,
      status: outcome.status,
      reply,
      tools_called,
      spend: {
        credits_total: outcome.state.running_total - outcome.started_total,
        running_total: outcome.state.running_total,
        ceiling: settings.spend_ceiling,
      },
      pending: pause
        ? {
            id: pauseId!,
            index: pause.index,
            tool: pause.tool,
            action: pause.action,
            credits: pause.credits,
            operation: pause.operation,
            reason: pause.reason,
            running_total_after: pause.running_total + pause.credits,
            ceiling: pause.ceiling,
            ...(pause.available === undefined ? {} : { available: pause.available }),
          }
        : null,
      stopped_by: outcome.stopped_by ?? null,
      decision: decision ?? null,
      model: { provider: model.kind, model: model.model, offline: model.kind === 'offline' },
      usage: { steps: outcome.state.steps, tokens: outcome.state.tokens },
    };
  }

  /** A conversation with its messages; each message's calls as the journal holds them now (refunds booked later included). */
  async conversation(id: string, userId: string) {
    const found = await this.deps.repository.conversation(id, userId);
    if (!found) throw new ConversationNotFound(`no conversation ${id}`);
    const calls = await this.deps.repository.toolCallsOf(found.messages.map((message) => message.id));
    return {
      id: found.conversation.id,
      title: found.conversation.title,
      created_at: found.conversation.created_at.toISOString(),
      updated_at: found.conversation.updated_at.toISOString(),
      messages: found.messages.map((message) => ({
        id: message.id,
        content: message.content,
        status: message.status,
        reply: message.reply,
        created_at: message.created_at.toISOString(),
        tools_called: calls
          .filter((call) => call.message_id === message.id && call.status !== 'charging')
          .map((call) => ({
            index: call.index,
            tool: call.tool,
            credits: call.credits,
            note: call.note,
            status: call.status,
            refund_pending: call.refund_pending,
          })),
        pending: message.status === 'paused' ? ((message.response as { pending?: unknown } | null)?.pending ?? null) : null,
      })),
    };
  }

  conversations(userId: string, limit: number, offset: number) {
    return this.deps.repository.conversations(userId, limit, offset);
  }

  async deleteConversation(id: string, userId: string): Promise<void> {
    const result = await this.deps.repository.deleteConversation(id, userId, this.deps.staleMs);
    if (result.busy) throw new ConversationBusy(`conversation ${id} is answering a message; delete it when it is done`);
    if (!result.deleted) throw new ConversationNotFound(`no conversation ${id}`);
  }

  /**
   * Settles what a failure left: refunds not booked when a tool failed, and calls whose process stopped
   * between their charge and their end (refunded: their result was never delivered). Returns how many
   * calls it settled.
   */
  async settleUnsettled(requestId: string): Promise<number> {
    const rows = await this.deps.repository.unsettledCalls(new Date(Date.now() - this.deps.staleMs));
    let settled = await this.settleJobs(requestId);
    for (const row of rows) {
      const key = row.idempotency_key ?? chargeKey(row.message_id, row.index);
      try {
        const refunded = await this.deps.gateway.refund(
          row.user_id,
          key,
          row.status === 'charging' ? 'the conductor stopped before the call ended' : 'refund of a failed call, booked late',
          requestId,
        );
        const note =
          row.status === 'charging'
            ? `interrupted before it ended; ${refunded ? 'refunded' : 'never charged'}`
            : `${row.note.replace(/; the refund of \d+ credits is pending$/, '')}; refunded later`;
        await this.deps.repository.settleCall(row.message_id, row.index, { status: 'failed', credits: 0, note, refund_pending: false });
        settled += 1;
      } catch (error) {
        this.deps.logger.warn({ err: error, message: row.message_id, index: row.index }, 'refund still not booked');
      }
    }
    return settled;
  }

  /**
   * The jobs paid calls started (simulation runs): hands the gateway those it has not taken yet, and
   * writes into the journal how the gateway settled those it followed, so a conversation shows a run
   * that failed later, or was cancelled before a step, as refunded, as the ledger has it. Returns how many
   * calls it settled.
   */
  private async settleJobs(requestId: string): Promise<number> {
    const { repository, gateway, logger } = this.deps;
    let settled = 0;
    for (const row of await repository.unsettledJobs()) {
      const key = row.idempotency_key ?? chargeKey(row.message_id, row.index);
      try {
        if (row.job_state === 'to_follow') {
          const followed = row.job ? await gateway.follow(row.user_id, key, row.job, requestId) : false;
          await repository.settleCall(row.message_id, row.index, { job_state: followed ? 'following' : 'settled' });
          continue;
        }
        const standing = await gateway.standing(row.user_id, key, requestId);
        if (standing?.state === 'following') {
          // Looked at: the others take their turn before this one again.
          await repository.settleCall(row.message_id, row.index, {});
          continue;
        }
        if (standing?.state === 'refunded') {
          const note = `${row.note}; then ${standing.reason ?? 'it delivered nothing'}: refunded ${standing.refunded} credits`;
          await repository.settleCall(row.message_id, row.index, {
            status: 'failed',
            credits: Math.max(0, standing.charged - standing.refunded),
            note,
            job_state: 'settled',
          });
        } else await repository.settleCall(row.message_id, row.index, { job_state: 'settled' });
        settled += 1;
      } catch (error) {
        logger.warn({ err: error, message: row.message_id, index: row.index }, 'the settlement of a job could not be read');
      }
    }
    return settled;
  }

  /**
   * Deletes everything the conductor holds of a user (account deletion): settings, conversations,
   * messages, pauses and the journal of calls. Refunds still pending are dropped, since the gateway deletes
   * the account's ledger with it; jobs the gateway follows go with its own records. Idempotent.
   */
  async deleteAccount(userId: string): Promise<AccountDeletion> {
    const deleted = isUserId(userId)
      ? await this.deps.repository.deleteUserData(userId.toLowerCase())
      : { settings: 0, conversations: 0, messages: 0, pauses: 0, tool_calls: 0, pending_refunds: 0 };
    return { service: 'conductor', deleted: { ...deleted }, kept: {}, notes: [] };
  }

  /**
   * A user's export, kinds in this order: `settings` (as stored; none when never set, in one page),
   * `conversations`, `messages` (each with its tool calls as the journal holds them), each by id.
   */
  exportReaders(userId: string): ExportReader[] {
    const { repository } = this.deps;
    const holds = isUserId(userId);
    const user = userId.toLowerCase();
    return [
      {
        kind: 'settings',
        read: async () => ({ items: holds ? (await repository.storedSettings(user)).map((row) => ({ ...row, updated_at: iso(row.updated_at as Date) })) : [] }),
      },
      {
        kind: 'conversations',
        after: UUID_POSITION,
        read: async (after, size) =>
          keysetPage(
            holds ? await repository.conversationsAfter(user, after, size + 1) : [],
            size,
            (row) => row.id,
            (row) => ({ id: row.id, title: row.title, created_at: iso(row.created_at), updated_at: iso(row.updated_at) }),
          ),
      },
      {
        kind: 'messages',
        after: UUID_POSITION,
        read: async (after, size) =>
          keysetPage(
            holds ? await repository.messagesAfter(user, after, size + 1) : [],
            size,
            (row) => row.message.id,
            ({ message, calls }) => ({
              id: message.id,
              conversation_id: message.conversation_id,
              content: message.content,
              status: message.status,
              reply: message.reply,
              created_at: iso(message.created_at),
              updated_at: iso(message.updated_at),
              tool_calls: calls.map((call) => ({
                index: call.index,
                tool: call.tool,
                arguments: call.arguments,
                status: call.status,
                credits: call.credits,
                operation: call.operation,
                note: call.note,
                output: call.output,
                created_at: iso(call.created_at),
              })),
            }),
          ),
      },
    ];
  }
}
