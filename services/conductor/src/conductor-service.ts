import { randomUUID } from 'node:crypto';
import type { AccountDeletion, ExportReader } from '@tempora/kit/http';
import type { Logger } from '@tempora/kit/observability';
import type { ChatMessage } from '@tempora/kit/providers';
import { z } from 'zod';
import { AccountData } from './account-export.ts';
import type { GatewayClient } from './clients/gateway.ts';
import type { GraphMcp } from './clients/graph-mcp.ts';
import { Conductor } from './domain/conductor.ts';
import { type Decision, decisionIn } from './domain/decision.ts';
import { graphTools } from './domain/graph-tools.ts';
import { offlinePlanner, type PlannerMemory } from './domain/planner.ts';
import { composeReply, systemPrompt } from './domain/reply.ts';
import type { Caps, RunOutcome, RunState } from './domain/run-types.ts';
import type { ConductorSettings, SettingsPatch } from './domain/settings.ts';
import type { ConductorTool } from './domain/tools.ts';
import type { ConductorRepository, MessageRow, ToolCallRow } from './repository.ts';
import { type ConductorResponse, responseOf } from './response.ts';
import { Settlement } from './settlement.ts';

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

const HISTORY_MESSAGES = 10;

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

  private readonly settlement: Settlement;
  private readonly accountData: AccountData;

  constructor(deps: ConductorServiceDeps) {
    this.deps = deps;
    this.settlement = new Settlement(deps);
    this.accountData = new AccountData(deps.repository);
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
    const response = responseOf(conductor.model, message.id, conversationId, outcome, reply, settings, decision, pause?.id);
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
   * Settles what a failure left: refunds not booked when a tool failed, calls whose process stopped between
   * their charge and their end, and the jobs of paid calls. Returns how many calls it settled.
   */
  settleUnsettled(requestId: string): Promise<number> {
    return this.settlement.settleUnsettled(requestId);
  }

  deleteAccount(userId: string): Promise<AccountDeletion> {
    return this.accountData.deleteAccount(userId);
  }

  exportReaders(userId: string): ExportReader[] {
    return this.accountData.exportReaders(userId);
  }
}
