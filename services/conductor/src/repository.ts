import { type Knex, oldestFirst, positionTime } from '@tempora/kit/data';
import type { Decision } from './domain/decision.ts';
import type { CallJournal, CallRecord, JobState, RunState } from './domain/run-types.ts';
import { type ConductorSettings, DEFAULT_SETTINGS, type SettingsPatch } from './domain/settings.ts';
import type { FollowedJob } from './domain/tools.ts';

export interface ConversationRow {
  id: string;
  user_id: string;
  title: string;
  busy_message: string | null;
  busy_since: Date | null;
  created_at: Date;
  updated_at: Date;
}

export type MessageStatus = 'running' | 'completed' | 'paused' | 'stopped' | 'declined' | 'failed';

export interface MessageRow {
  id: string;
  conversation_id: string;
  user_id: string;
  content: string;
  status: MessageStatus;
  reply: string | null;
  response: Record<string, unknown> | null;
  state: RunState | null;
  created_at: Date;
  updated_at: Date;
}

export interface ToolCallRow {
  message_id: string;
  index: number;
  user_id: string;
  tool: string;
  arguments: Record<string, unknown>;
  status: 'charging' | CallRecord['status'];
  credits: number;
  operation: string | null;
  idempotency_key: string | null;
  note: string;
  output: Record<string, unknown> | null;
  refund_pending: boolean;
  duration_ms: number;
  job: FollowedJob | null;
  job_state: JobState | null;
  created_at: Date;
  updated_at: Date;
}

/** What an account held here, by kind, as its deletion counts it. */
export interface AccountDataCounts {
  settings: number;
  conversations: number;
  messages: number;
  pauses: number;
  tool_calls: number;
  /** Refunds of failed calls the gateway had not booked yet: dropped with the account (its ledger goes too). */
  pending_refunds: number;
}

/** How claiming a conversation for a message went. */
export type Claim = 'claimed' | 'busy' | 'missing';

export type PauseState = 'pending' | 'confirmed' | 'declined' | 'superseded';

/** How claiming a paused call for a decision went: the message to resume, or the state of the call named (none: unknown). */
export type PauseClaim = { message: MessageRow } | { message?: undefined; state: PauseState | undefined };

const jsonb = (value: unknown) => JSON.stringify(value) as never;

/** All of the conductor's SQL: settings, conversations, messages, their pauses and the journal of tool calls. */
export class ConductorRepository {
  private readonly knex: Knex;

  constructor(knex: Knex) {
    this.knex = knex;
  }

  async settings(userId: string): Promise<ConductorSettings> {
    const row = await this.knex('conductor_settings').where({ user_id: userId }).first('autonomy', 'verbosity', 'spend_ceiling', 'default_render');
    return row ? { ...DEFAULT_SETTINGS, ...row } : { ...DEFAULT_SETTINGS };
  }

  /** Merges `patch` into the account's settings in one statement (concurrent patches of different fields both land). */
  async patchSettings(userId: string, patch: SettingsPatch): Promise<ConductorSettings> {
    const base = { ...DEFAULT_SETTINGS, ...patch };
    const [row] = await this.knex('conductor_settings')
      .insert({ user_id: userId, ...base, updated_at: this.knex.fn.now() })
      .onConflict('user_id')
      .merge([...Object.keys(patch), 'updated_at'])
      .returning(['autonomy', 'verbosity', 'spend_ceiling', 'default_render']);
    return row as ConductorSettings;
  }

  /** A new conversation, already claimed by its first message, and that message (one statement). */
  async startConversation(id: string, message: Pick<MessageRow, 'id' | 'user_id' | 'content'>): Promise<void> {
    await this.knex.raw(
      `with conversation as (
         insert into conductor_conversations (id, user_id, title, busy_message, busy_since) values (?, ?, ?, ?, now()) returning id
       )
       insert into conductor_messages (id, conversation_id, user_id, content, status) select ?, conversation.id, ?, ?, 'running' from conversation`,
      [id, message.user_id, message.content.slice(0, 200), message.id, message.id, message.user_id, message.content],
    );
  }

  /**
   * Makes `messageId` the conversation's one message at work. A claim older than `staleMs` (its process
   * died) is taken over.
   */
  async claimConversation(id: string, userId: string, messageId: string, staleMs: number): Promise<Claim> {
    const claimed = await this.knex('conductor_conversations')
      .where({ id, user_id: userId })
      .andWhere((query) => query.whereNull('busy_message').orWhere('busy_since', '<', new Date(Date.now() - staleMs)))
      .update({ busy_message: messageId, busy_since: this.knex.fn.now(), updated_at: this.knex.fn.now() });
    if (claimed > 0) return 'claimed';
    const exists = await this.knex('conductor_conversations').where({ id, user_id: userId }).first('id');
    return exists ? 'busy' : 'missing';
  }

  async releaseConversation(id: string, messageId: string): Promise<void> {
    await this.knex('conductor_conversations')
      .where({ id, busy_message: messageId })
      .update({ busy_message: null, busy_since: null, updated_at: this.knex.fn.now() });
  }

  async insertMessage(row: Pick<MessageRow, 'id' | 'conversation_id' | 'user_id' | 'content' | 'status'>): Promise<void> {
    await this.knex('conductor_messages').insert(row);
  }

  async finishMessage(id: string, fields: { status: MessageStatus; reply: string; response: object; state: RunState | null }): Promise<void> {
    await this.knex('conductor_messages')
      .where({ id })
      .update({
        status: fields.status,
        reply: fields.reply,
        response: jsonb(fields.response),
        state: fields.state ? jsonb(fields.state) : null,
        updated_at: this.knex.fn.now(),
      });
  }

  /**
   * Stores a message's answer and frees its conversation (held by `holder`) in one statement; a paused
   * answer records its pause (`pause.id`, the id a decision must name) in the same statement.
   */
  async finishAndRelease(
    id: string,
    fields: { status: MessageStatus; reply: string; response: object; state: RunState | null },
    conversationId: string,
    holder: string,
    pause?: { id: string; index: number },
  ): Promise<void> {
    await this.knex.raw(
      `with finished as (
         update conductor_messages set status = ?, reply = ?, response = ?::jsonb, state = ?::jsonb, updated_at = now() where id = ? returning id
       ), paused as (
         insert into conductor_pauses (id, message_id, conversation_id, index) select ?::uuid, finished.id, ?::uuid, ?::int from finished where ?::uuid is not null
       )
       update conductor_conversations set busy_message = null, busy_since = null, updated_at = now() where id = ? and busy_message = ?`,
      [
        fields.status,
        fields.reply,
        JSON.stringify(fields.response),
        fields.state ? JSON.stringify(fields.state) : null,
        id,
        pause?.id ?? null,
        conversationId,
        pause?.index ?? 0,
        pause?.id ?? null,
        conversationId,
        holder,
      ],
    );
  }

  /**
   * Claims the paused call `pauseId` of the conversation for `decision`, and marks its message as being
   * worked on again, in one statement: of concurrent claims of one call exactly one gets the message (the
   * others wait on the pause's row, then find it no longer pending), so a call runs at most once and only
   * for a decision that names it.
   */
  async claimPause(conversationId: string, pauseId: string, decision: Decision): Promise<PauseClaim> {
    const { rows } = (await this.knex.raw(
      `with claimed as (
         update conductor_pauses p set state = ?, decided_at = now()
         from conductor_messages m
         where p.id = ? and p.conversation_id = ? and p.state = 'pending' and m.id = p.message_id and m.status = 'paused'
         returning p.message_id
       )
       update conductor_messages set status = 'running', updated_at = now() from claimed where conductor_messages.id = claimed.message_id returning conductor_messages.*`,
      [decision === 'confirm' ? 'confirmed' : 'declined', pauseId, conversationId],
    )) as { rows: MessageRow[] };
    if (rows[0]) return { message: rows[0] };
    const known = await this.knex('conductor_pauses').where({ id: pauseId, conversation_id: conversationId }).first<{ state: PauseState } | undefined>('state');
    return { state: known?.state };
  }

  /** A new request came instead of a decision: the paused message is left declined and its pause can no longer be decided. */
  async supersedePaused(messageId: string): Promise<void> {
    await this.knex.raw(
      `with superseded as (
         update conductor_pauses set state = 'superseded', decided_at = now() where message_id = ? and state = 'pending' returning id
       )
       update conductor_messages set status = 'declined', state = null, updated_at = now() where id = ? and status = 'paused'`,
      [messageId, messageId],
    );
  }

  /** The conversation's paused message, if its latest message is one. */
  async pausedMessage(conversationId: string): Promise<MessageRow | undefined> {
    const latest = await this.knex<MessageRow>('conductor_messages')
      .where({ conversation_id: conversationId })
      .orderBy('created_at', 'desc')
      .orderBy('id', 'desc')
      .first();
    return latest?.status === 'paused' ? latest : undefined;
  }

  /** The conversation's earlier messages that got an answer, oldest first (the last `limit`). */
  async history(conversationId: string, limit: number): Promise<MessageRow[]> {
    const rows = await this.knex<MessageRow>('conductor_messages')
      .where({ conversation_id: conversationId })
      .whereIn('status', ['completed', 'stopped', 'paused', 'declined'])
      .orderBy('created_at', 'desc')
      .limit(limit);
    return rows.reverse();
  }

  async toolCallsOf(messageIds: string[]): Promise<ToolCallRow[]> {
    if (messageIds.length === 0) return [];
    return this.knex<ToolCallRow>('conductor_tool_calls').whereIn('message_id', messageIds).orderBy(['message_id', 'index']);
  }

  async conversation(id: string, userId: string): Promise<{ conversation: ConversationRow; messages: MessageRow[] } | undefined> {
    const conversation = await this.knex<ConversationRow>('conductor_conversations').where({ id, user_id: userId }).first();
    if (!conversation) return undefined;
    const messages = await this.knex<MessageRow>('conductor_messages').where({ conversation_id: id }).orderBy('created_at', 'asc').orderBy('id', 'asc');
    return { conversation, messages };
  }

  async conversations(userId: string, limit: number, offset: number): Promise<{ items: ConversationRow[]; total: number }> {
    const base = this.knex<ConversationRow>('conductor_conversations').where({ user_id: userId });
    const [items, [count]] = await Promise.all([
      base.clone().orderBy('updated_at', 'desc').limit(limit).offset(offset),
      base.clone().count<{ count: string }[]>('* as count'),
    ]);
    return { items: items as ConversationRow[], total: Number(count?.count ?? 0) };
  }

  /** Deletes a conversation that is not at work; false when there is none (or it is busy: `busy` true). */
  async deleteConversation(id: string, userId: string, staleMs: number): Promise<{ deleted: boolean; busy: boolean }> {
    const deleted = await this.knex('conductor_conversations')
      .where({ id, user_id: userId })
      .andWhere((query) => query.whereNull('busy_message').orWhere('busy_since', '<', new Date(Date.now() - staleMs)))
      .delete();
    if (deleted > 0) return { deleted: true, busy: false };
    const exists = await this.knex('conductor_conversations').where({ id, user_id: userId }).first('id');
    return { deleted: false, busy: Boolean(exists) };
  }

  /** The journal of one message's calls. */
  journal(messageId: string, userId: string): CallJournal {
    return {
      record: async (entries) => {
        const rows = entries.map(({ record, key }) => ({
          message_id: messageId,
          index: record.index,
          user_id: userId,
          tool: record.tool,
          arguments: jsonb(record.arguments),
          status: record.status,
          credits: record.credits,
          operation: record.operation,
          idempotency_key: key,
          note: 'note' in record ? record.note : '',
          output: 'output' in record && record.output ? jsonb(record.output) : null,
          refund_pending: 'refund_pending' in record ? record.refund_pending : false,
          duration_ms: 'duration_ms' in record ? record.duration_ms : 0,
          job: 'job' in record && record.job ? jsonb({ upstream: record.job.upstream, location: record.job.location }) : null,
          job_state: 'job' in record && record.job ? record.job.state : null,
          updated_at: this.knex.fn.now(),
        }));
        await this.knex('conductor_tool_calls').insert(rows).onConflict(['message_id', 'index']).merge();
      },
      forget: async (index) => {
        await this.knex('conductor_tool_calls').where({ message_id: messageId, index }).delete();
      },
    };
  }

  /** Calls that were not recorded free of charge: written without their charge settled (before `olderThan`), or waiting for a refund. */
  async unsettledCalls(olderThan: Date, limit = 100): Promise<ToolCallRow[]> {
    return this.knex<ToolCallRow>('conductor_tool_calls')
      .where((query) => query.where('status', 'charging').andWhere('updated_at', '<', olderThan))
      .orWhere('refund_pending', true)
      .orderBy('updated_at')
      .limit(limit);
  }

  /** Calls whose job the gateway has yet to take, or follows still, least recently looked at first. */
  async unsettledJobs(limit = 100): Promise<ToolCallRow[]> {
    return this.knex<ToolCallRow>('conductor_tool_calls').whereIn('job_state', ['to_follow', 'following']).orderBy('updated_at').limit(limit);
  }

  async settleCall(
    messageId: string,
    index: number,
    fields: Partial<Pick<ToolCallRow, 'status' | 'credits' | 'note' | 'refund_pending' | 'job_state'>>,
  ): Promise<void> {
    await this.knex('conductor_tool_calls')
      .where({ message_id: messageId, index })
      .update({ ...fields, updated_at: this.knex.fn.now() });
  }

  /**
   * Deletes everything the conductor holds of a user, in one transaction: settings, conversations, their
   * messages, pauses and calls. A message at work is deleted too (its turn's writes then find nothing).
   */
  async deleteUserData(userId: string): Promise<AccountDataCounts> {
    return this.knex.transaction(async (trx) => {
      const [pending] = await trx('conductor_tool_calls').where({ user_id: userId, refund_pending: true }).count<{ count: string }[]>('* as count');
      // Pauses, messages and calls go by their user as well as by cascade, so each is counted.
      const pauses = await trx('conductor_pauses')
        .whereIn('conversation_id', trx('conductor_conversations').where({ user_id: userId }).select('id'))
        .delete();
      const tool_calls = await trx('conductor_tool_calls').where({ user_id: userId }).delete();
      const messages = await trx('conductor_messages').where({ user_id: userId }).delete();
      const conversations = await trx('conductor_conversations').where({ user_id: userId }).delete();
      const settings = await trx('conductor_settings').where({ user_id: userId }).delete();
      return { settings, conversations, messages, pauses, tool_calls, pending_refunds: Number(pending?.count ?? 0) };
    });
  }

  /** The account's stored settings (none when it never set any). */
  async storedSettings(userId: string): Promise<Array<Record<string, unknown>>> {
    return this.knex('conductor_settings').where({ user_id: userId }).select('autonomy', 'verbosity', 'spend_ceiling', 'default_render', 'updated_at');
  }

  /** Up to `limit` of the user's conversations past `after`, oldest first, then by id (an export's keyset pages). */
  async conversationsAfter(
    userId: string,
    after: { at: string; id: string } | undefined,
    limit: number,
  ): Promise<Array<ConversationRow & { position_at: string }>> {
    const query = this.knex('conductor_conversations').select('*', positionTime(this.knex, 'created_at')).where({ user_id: userId }).limit(limit);
    return oldestFirst(query, ['created_at', 'id'], after && [after.at, after.id]);
  }

  /** Up to `limit` of the user's messages past `after`, oldest first, then by id, each with its calls. */
  async messagesAfter(
    userId: string,
    after: { at: string; id: string } | undefined,
    limit: number,
  ): Promise<Array<{ message: MessageRow; calls: ToolCallRow[]; position_at: string }>> {
    const query = this.knex('conductor_messages').select('*', positionTime(this.knex, 'created_at')).where({ user_id: userId }).limit(limit);
    const rows: Array<MessageRow & { position_at: string }> = await oldestFirst(query, ['created_at', 'id'], after && [after.at, after.id]);
    const calls = await this.toolCallsOf(rows.map((row) => row.id));
    return rows.map(({ position_at, ...message }) => ({ message, calls: calls.filter((call) => call.message_id === message.id), position_at }));
  }
}
