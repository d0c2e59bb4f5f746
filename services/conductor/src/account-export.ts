import { type AccountDeletion, type ExportReader, keysetPage, oldestFirstAfter, oldestFirstParts, oldestFirstPosition, UUID_ID } from '@tempora/kit/http';
import { z } from 'zod';
import type { ConductorRepository } from './repository.ts';

/** The conductor's users are the gateway's, named by UUID: any other id holds nothing here. */
const isUserId = (id: string) => z.uuid().safeParse(id).success;

/** A conversation's or message's position: its creation time, then its id. */
const POSITION = oldestFirstAfter(UUID_ID);

const iso = (value: Date | string) => (value instanceof Date ? value.toISOString() : value);

/** An account's data as the gateway deletes and exports it (services/kit/src/http/account-data.ts). */
export class AccountData {
  private readonly repository: ConductorRepository;

  constructor(repository: ConductorRepository) {
    this.repository = repository;
  }

  /**
   * Deletes everything the conductor holds of a user (account deletion): settings, conversations,
   * messages, pauses and the journal of calls. Refunds still pending are dropped, since the gateway deletes
   * the account's ledger with it; jobs the gateway follows go with its own records. Idempotent.
   */
  async deleteAccount(userId: string): Promise<AccountDeletion> {
    const deleted = isUserId(userId)
      ? await this.repository.deleteUserData(userId.toLowerCase())
      : { settings: 0, conversations: 0, messages: 0, pauses: 0, tool_calls: 0, pending_refunds: 0 };
    return { service: 'conductor', deleted: { ...deleted }, kept: {}, notes: [] };
  }

  /**
   * A user's export, kinds in this order: `settings` (as stored; none when never set, in one page),
   * `conversations`, `messages` (each with its tool calls as the journal holds them), each oldest first, then
   * by id (docs/accounts.md, "Export").
   */
  exportReaders(userId: string): ExportReader[] {
    const { repository } = this;
    const holds = isUserId(userId);
    const user = userId.toLowerCase();
    return [
      {
        kind: 'settings',
        read: async () => ({ items: holds ? (await repository.storedSettings(user)).map((row) => ({ ...row, updated_at: iso(row.updated_at as Date) })) : [] }),
      },
      {
        kind: 'conversations',
        after: POSITION,
        read: async (after, size) =>
          keysetPage(
            holds ? await repository.conversationsAfter(user, oldestFirstParts(after), size + 1) : [],
            size,
            (row) => oldestFirstPosition(row.position_at, row.id),
            (row) => ({ id: row.id, title: row.title, created_at: iso(row.created_at), updated_at: iso(row.updated_at) }),
          ),
      },
      {
        kind: 'messages',
        after: POSITION,
        read: async (after, size) =>
          keysetPage(
            holds ? await repository.messagesAfter(user, oldestFirstParts(after), size + 1) : [],
            size,
            (row) => oldestFirstPosition(row.position_at, row.message.id),
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
