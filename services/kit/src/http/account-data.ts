import { z } from 'zod';

/**
 * What every service holding a user's data answers the gateway when an account is deleted or exported
 * (docs/accounts.md). Both calls carry X-Service-Key only; the user is the path's `{user_id}`:
 *
 * - `DELETE /api/v1/users/{user_id}/data`: deletes what the service holds of the user, or anonymises what
 *   it must keep, and says which. Idempotent: a second call answers zero counts.
 * - `GET /api/v1/users/{user_id}/data?cursor=&limit=`: one page of the user's data, one kind per page,
 *   kinds in a fixed order; `next_cursor` is null after the last page. Nothing is left out silently.
 *
 * The gateway's client parses both answers with these schemas, and the services document their routes
 * with them, so the two sides cannot drift.
 */
/** The route template every service serves the contract under. */
export const ACCOUNT_DATA_ROUTE = '/api/v1/users/{user_id}/data';
/** The contract's path for one user, as the gateway calls it. */
export const ACCOUNT_DATA_PATH = (userId: string) => ACCOUNT_DATA_ROUTE.replace('{user_id}', encodeURIComponent(userId));

export const AccountUserParams = z.object({ user_id: z.string().min(1).max(128) });

export const AccountDeletionSchema = z
  .object({
    service: z.string().describe('The service that answered'),
    deleted: z.record(z.string(), z.number().int().nonnegative()).describe('Kind of data → how many were deleted'),
    kept: z
      .record(z.string(), z.object({ count: z.number().int().nonnegative(), reason: z.string() }))
      .describe('Kind of data → how many were kept anonymised, and why (for example payment records the law requires keeping)'),
    notes: z.array(z.string()).describe('What the user must do elsewhere, for example cancel an App Store plan with Apple'),
  })
  .meta({ id: 'AccountDeletion' });
export type AccountDeletion = z.infer<typeof AccountDeletionSchema>;

export const ACCOUNT_EXPORT_PAGE_MAX = 500;

export const AccountExportQuery = z.object({
  cursor: z.string().max(512).optional().describe('`next_cursor` of the previous page; absent for the first'),
  limit: z.coerce.number().int().min(1).max(ACCOUNT_EXPORT_PAGE_MAX).default(200),
});

export const AccountExportPageSchema = z
  .object({
    service: z.string(),
    kind: z.string().describe('What the items are (one kind per page), for example `timepoints`'),
    items: z.array(z.record(z.string(), z.unknown())),
    next_cursor: z.string().nullable().describe('Pass as `cursor` for the next page; null after the last'),
  })
  .meta({ id: 'AccountExportPage' });
export type AccountExportPage = z.infer<typeof AccountExportPageSchema>;

/**
 * A cursor over a service's export: which kind of its ordered list, and the position in it (an offset or
 * the last id seen, as the service chooses). Opaque to the gateway.
 */
export interface ExportPosition {
  kind: number;
  after: string;
}

export const encodeExportCursor = (position: ExportPosition): string => Buffer.from(JSON.stringify(position)).toString('base64url');

/** The position a cursor names, or undefined when it is not one of ours (a 400 for the route). */
export function decodeExportCursor(cursor: string | undefined): ExportPosition | undefined {
  if (cursor === undefined) return { kind: 0, after: '' };
  try {
    const value = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as unknown;
    const parsed = z.object({ kind: z.number().int().min(0).max(64), after: z.string().max(256) }).safeParse(value);
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}

/**
 * One page of an export over ordered kinds: `readers[k]` reads up to `limit` items of kind k after
 * `after` and says where the next page starts (undefined when that kind is done). Services call it from
 * their export route so every service pages alike.
 */
export async function exportPage(
  service: string,
  readers: ReadonlyArray<{ kind: string; read: (after: string, limit: number) => Promise<{ items: Array<Record<string, unknown>>; next?: string }> }>,
  position: ExportPosition,
  limit: number,
): Promise<AccountExportPage> {
  const reader = readers[position.kind];
  if (!reader) return { service, kind: 'end', items: [], next_cursor: null };
  const { items, next } = await reader.read(position.after, limit);
  const following = next !== undefined ? { kind: position.kind, after: next } : position.kind + 1 < readers.length ? { kind: position.kind + 1, after: '' } : undefined;
  return { service, kind: reader.kind, items, next_cursor: following ? encodeExportCursor(following) : null };
}
