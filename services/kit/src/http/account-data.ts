import type { Context } from 'koa';
import { z } from 'zod';
import { badRequest, forbidden } from './errors.ts';
import { CALLER_SCHEMES, isServiceItself } from './gateway-caller.ts';
import { defineRoute, type ResponseSpec, type RouteDefinition } from './routes.ts';

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

const ExportPositionSchema = z.object({ kind: z.number().int().min(0).max(64), after: z.string().max(256) });

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
    const parsed = ExportPositionSchema.safeParse(value);
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}

/** The one answer to a cursor this service did not issue. */
const NOT_OURS = 'cursor: not a next_cursor this service issued; start without one';

/** A cursor at a position this service never hands out: the export route answers 400. */
export class InvalidExportPosition extends Error {
  override name = 'InvalidExportPosition';
  constructor() {
    super(NOT_OURS);
  }
}

/** The ids the services key a user's rows by. */
export const UUID_ID = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/i;

/**
 * Every kind is listed oldest first: by its rows' creation time, to the microsecond, then by their id
 * (docs/accounts.md, "Export"), so that the same data exports the same way every time and the gateway
 * writes each service's pages out as they come. A position in that order is the last row's time as the
 * kit's `positionTime` selects it (UTC, six decimals: 27 characters), a slash, then its id in the form `id`
 * gives (unanchored); a kind read this way passes `oldestFirstAfter(id)` as its reader's `after`.
 */
export function oldestFirstAfter(id: RegExp): RegExp {
  return new RegExp(`^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}\\.\\d{6}Z/(?:${id.source})$`, id.flags);
}

/** A row's position oldest first: its `position_at` (the kit's `positionTime`) and its id. */
export const oldestFirstPosition = (positionAt: string, id: string): string => `${positionAt}/${id}`;

/**
 * The time and the id of a position `oldestFirstAfter` admitted; undefined for a kind's first page ('').
 * A time of the form that names no instant (February 30th, hour 25, year 0) was never handed out: it throws
 * InvalidExportPosition (a 400), where PostgreSQL would refuse it as a timestamp.
 */
export function oldestFirstParts(after: string): { at: string; id: string } | undefined {
  if (after === '') return undefined;
  const at = after.slice(0, 27);
  const instant = new Date(at);
  // Year 0 is a date to JavaScript, not to PostgreSQL.
  if (Number.isNaN(instant.getTime()) || instant.getUTCFullYear() < 1 || instant.toISOString().slice(0, 23) !== at.slice(0, 23))
    throw new InvalidExportPosition();
  return { at, id: after.slice(28) };
}

/** One kind of a service's export, in the order its `exportPage` serves them. */
export interface ExportReader {
  kind: string;
  /**
   * The form of the positions `read` hands out as `next` (no `g` flag): a cursor at a position of another
   * form is not ours, and never reaches `read`. A kind without it is read in one page.
   */
  after?: RegExp;
  /** Up to `limit` items after `after` (`''` on the kind's first page), and where the next page starts when the kind goes on. */
  read: (after: string, limit: number) => Promise<{ items: Array<Record<string, unknown>>; next?: string | undefined }>;
}

/**
 * One page of an export over ordered kinds, where `readers[k]` reads kind k. A position `after` a reader
 * does not hand out throws InvalidExportPosition; a kind past the last answers an empty, final page.
 * Services page through it so every service pages alike.
 */
export async function exportPage(service: string, readers: readonly ExportReader[], position: ExportPosition, limit: number): Promise<AccountExportPage> {
  const reader = readers[position.kind];
  if (!reader) return { service, kind: 'end', items: [], next_cursor: null };
  if (position.after !== '' && !reader.after?.test(position.after)) throw new InvalidExportPosition();
  const { items, next } = await reader.read(position.after, limit);
  const following =
    next !== undefined ? { kind: position.kind, after: next } : position.kind + 1 < readers.length ? { kind: position.kind + 1, after: '' } : undefined;
  return { service, kind: reader.kind, items, next_cursor: following ? encodeExportCursor(following) : null };
}

/**
 * One keyset page from `rows`, read as up to `limit + 1` in key order: a row beyond `limit` says the kind
 * goes on after the last one kept, so a kind never ends on an empty page. `view` shapes the items kept.
 */
export function keysetPage<T>(rows: readonly T[], limit: number, idOf: (row: T) => string): { items: T[]; next?: string };
export function keysetPage<T, V>(rows: readonly T[], limit: number, idOf: (row: T) => string, view: (row: T) => V): { items: V[]; next?: string };
export function keysetPage<T, V>(rows: readonly T[], limit: number, idOf: (row: T) => string, view?: (row: T) => V): { items: Array<T | V>; next?: string } {
  const kept = rows.slice(0, limit);
  const items = view ? kept.map((row) => view(row)) : kept;
  return rows.length > limit ? { items, next: idOf(kept[kept.length - 1]!) } : { items };
}

/**
 * The gateway's own call: the route's security admitted a service credential, and it names no user. Behind
 * the kit's `gatewayCaller` the caller says so; elsewhere the X-User-ID header would name one.
 */
const isGatewayItself = (ctx: Context): boolean => (ctx.state.caller ? isServiceItself(ctx) : !ctx.get('X-User-ID'));

export interface AccountDataRoutesOptions {
  /** The service's name in every answer. */
  service: string;
  /** Deletes (or anonymises) what the service holds of the user; the answer's `kept` and `notes` default to none. */
  erase: (userId: string) => Promise<Pick<AccountDeletion, 'deleted'> & Partial<AccountDeletion>>;
  /** What the two operations say in the OpenAPI document: what goes, what is kept, the kinds in order. */
  describe: { deletion: { summary: string; description: string }; export: { summary: string; description: string } };
  /** The answers a service adds to the contract's own (its 422 for an id that is not a user's, its 5xx for a provider that failed). */
  extraResponses?: { deletion?: Record<number, ResponseSpec>; export?: Record<number, ResponseSpec> };
}

/** The export as the kinds a user's data is read in: a cursor past the last kind is not ours. */
interface ByReaders {
  readers: (userId: string) => readonly ExportReader[];
  exportPage?: never;
}
/** The export as the service pages it itself (with the kit's `exportPage`), throwing InvalidExportPosition. */
interface ByPages {
  exportPage: (userId: string, position: ExportPosition, limit: number) => Promise<AccountExportPage>;
  readers?: never;
}

const GATEWAY_ONLY = "account deletion and export are the gateway's own calls, not a user's (send X-Service-Key without X-User-ID)";
const refused: Record<number, ResponseSpec> = {
  401: { description: 'No or wrong X-Service-Key' },
  403: { description: "Not the gateway's own call: a user's request (X-User-ID beside the service key, or a user's credential)" },
};

/**
 * The two operations of the account-data contract for one service, `deleteUserData` and `exportUserData`
 * on ACCOUNT_DATA_ROUTE: the gateway's own calls (its service key, no user named, else 403), answered and
 * documented with the contract's schemas; a cursor the service did not issue is 400.
 */
export function defineAccountDataRoutes(options: AccountDataRoutesOptions & (ByReaders | ByPages)): RouteDefinition[] {
  const { service, erase, describe, extraResponses = {} } = options;
  const requireGateway = (ctx: Context) => {
    if (!isGatewayItself(ctx)) throw forbidden(GATEWAY_ONLY);
  };
  const page = async (userId: string, cursor: string | undefined, limit: number): Promise<AccountExportPage> => {
    const readers = options.readers?.(userId);
    const position = decodeExportCursor(cursor);
    if (!position || (readers && position.kind >= readers.length)) throw new InvalidExportPosition();
    return readers ? exportPage(service, readers, position, limit) : options.exportPage!(userId, position, limit);
  };
  return [
    defineRoute({
      method: 'delete',
      path: ACCOUNT_DATA_ROUTE,
      operationId: 'deleteUserData',
      ...describe.deletion,
      tags: ['accounts'],
      security: [CALLER_SCHEMES.service],
      params: AccountUserParams,
      responses: {
        200: { description: 'What was deleted, and what was kept anonymised', schema: AccountDeletionSchema },
        ...refused,
        ...extraResponses.deletion,
      },
      handler: async (ctx, { params }): Promise<AccountDeletion> => {
        requireGateway(ctx);
        return { kept: {}, notes: [], ...(await erase(params.user_id)), service };
      },
    }),
    defineRoute({
      method: 'get',
      path: ACCOUNT_DATA_ROUTE,
      operationId: 'exportUserData',
      ...describe.export,
      tags: ['accounts'],
      security: [CALLER_SCHEMES.service],
      params: AccountUserParams,
      query: AccountExportQuery,
      responses: {
        200: { description: 'One page of one kind', schema: AccountExportPageSchema },
        400: { description: 'A cursor this service did not issue' },
        ...refused,
        ...extraResponses.export,
      },
      handler: async (ctx, { params, query }) => {
        requireGateway(ctx);
        try {
          return await page(params.user_id, query.cursor, query.limit);
        } catch (error) {
          if (error instanceof InvalidExportPosition) throw badRequest(NOT_OURS);
          throw error;
        }
      },
    }),
  ];
}
