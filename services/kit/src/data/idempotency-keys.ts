import type { Knex } from 'knex';

/** An Idempotency-Key as its owner used it, with the fingerprint of the request it came with. */
export interface IdempotencyKey {
  owner: string;
  key: string;
  fingerprint: string;
}

/** Where a service keeps its keys: a table with primary key (owner, key), `fingerprint`, and `column` naming the row the key created in `target`. */
export interface IdempotencyKeyTable {
  table: string;
  column: string;
  target: string;
}

/**
 * Claims `key` for the row about to be inserted as `id`, in the caller's transaction, before anything else
 * it writes: undefined when claimed, else the row the key already created, with the fingerprint of the
 * request that created it. A concurrent request with the same key waits on the key's primary key until
 * the claiming transaction ends: once it commits, that request finds its row; if it rolls back, the key
 * is free again.
 */
export async function claimIdempotencyKey<Row>(
  trx: Knex.Transaction,
  where: IdempotencyKeyTable,
  key: IdempotencyKey,
  id: string,
): Promise<{ row: Row; fingerprint: string } | undefined> {
  const claimed = await trx(where.table)
    .insert({ ...key, [where.column]: id })
    .onConflict(['owner', 'key'])
    .ignore()
    .returning(where.column);
  if (claimed.length) return undefined;
  // A new statement under READ COMMITTED: it sees the key and the row as the transaction that held the key committed them.
  const { fingerprint, ...row } = (await trx(`${where.table} as k`)
    .join(`${where.target} as t`, 't.id', `k.${where.column}`)
    .where({ 'k.owner': key.owner, 'k.key': key.key })
    .first('t.*', 'k.fingerprint')) as Row & { fingerprint: string };
  return { row: row as Row, fingerprint };
}
