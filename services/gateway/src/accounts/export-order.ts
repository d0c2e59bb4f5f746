import type { StagedItem } from '../repository/index.ts';

/** The date-times an item's creation time is read from: ISO 8601, as every service writes them. */
const DATE_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?(?:Z|[+-]\d{2}:\d{2})$/;
/** Where an item that names no creation time sorts: before those that do. */
const UNDATED = '-infinity';
/** Ids of digits (numbers, or bigint ids written as strings) sort as numbers: padded to a bigint's width. */
const NUMERIC_ID = /^\d{1,20}$/;
const NUMERIC_ID_WIDTH = 20;

/** An item's id, where it sorts among items of the same time: `id`, else `job_id`, else `key`; '' when none. */
function idOf(item: Record<string, unknown>): string {
  const id = [item.id, item.job_id, item.key].find((value) => typeof value === 'string' || (Number.isSafeInteger(value) && (value as number) >= 0));
  if (id === undefined) return '';
  const text = String(id);
  return NUMERIC_ID.test(text) ? text.padStart(NUMERIC_ID_WIDTH, '0') : text;
}

/**
 * An item of a service's export with the key it sorts by within its kind (docs/accounts.md, "Export"):
 * its creation time (`created_at`, else `at` for an item that records one moment), then its id; the
 * services page in their own key order, often a random UUID, which would differ from one export of the
 * same data to the next.
 */
export function staged(item: Record<string, unknown>): StagedItem {
  const created = [item.created_at, item.at].find((value): value is string => typeof value === 'string' && DATE_TIME.test(value));
  return { created: created ?? UNDATED, id: idOf(item), json: JSON.stringify(item) };
}
