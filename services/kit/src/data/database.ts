import { mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import { pg_trgm } from '@electric-sql/pglite/contrib/pg_trgm';
import knexFactory, { type Knex } from 'knex';
import ClientPgLite from 'knex-pglite';
import type { Logger } from '../observability/logger.ts';

export type { Knex };

/** A migration in code: knex's own migrator runs it, tracked in the service's own table. */
export interface Migration {
  name: string;
  up(knex: Knex): Promise<void>;
  down(knex: Knex): Promise<void>;
}

export interface DatabaseOptions {
  service: string;
  url: string | undefined;
  dataDir: string;
  migrations: Migration[];
  logger: Logger;
  pool?: { min: number; max: number };
}

export interface Database {
  knex: Knex;
  /** True for real PostgreSQL; false for the embedded PGlite fallback (one connection, no LISTEN across processes). */
  shared: boolean;
  ping(): Promise<boolean>;
  close(): Promise<void>;
}

/**
 * Opens PostgreSQL at DATABASE_URL, or an embedded PGlite under TEMPORA_DATA_DIR/<service> when it is unset,
 * and brings the schema up to date. Each service tracks its migrations in `<service>_migrations`, so several
 * services can share one database in development without stepping on each other.
 */
export async function openDatabase(options: DatabaseOptions): Promise<Database> {
  const shared = Boolean(options.url);
  const knex = shared
    ? knexFactory({ client: 'pg', connection: options.url, pool: options.pool ?? { min: 0, max: 10 } })
    : await embedded(join(resolve(options.dataDir), options.service));

  const migrationSource: Knex.MigrationSource<Migration> = {
    getMigrations: async () => options.migrations,
    getMigrationName: (migration) => migration.name,
    getMigration: async (migration) => migration,
  };
  // A database a newer release migrated further (a rollback, an old pod during a rolling upgrade) still
  // opens: migrations only expand the schema, and removals wait a release (docs/operations.md). knex's
  // list check would refuse it ("the migration directory is corrupt"), so it is off and named instead.
  const config = { migrationSource, tableName: `${options.service}_migrations`, disableMigrationsListValidation: true };
  const migrate = async () => (await knex.migrate.latest(config)) as [number, string[]];
  const [, applied] = shared ? await oneMigratorAtATime(knex, config.tableName, migrate) : await migrate();
  if (applied.length > 0) options.logger.info({ applied }, 'database migrated');
  const known = new Set(options.migrations.map((migration) => migration.name));
  const ahead = ((await knex(config.tableName).select('name')) as Array<{ name: string }>).map((row) => row.name).filter((name) => !known.has(name));
  if (ahead.length > 0) options.logger.warn({ ahead }, 'the database holds migrations of a newer release; running on its schema');

  return {
    knex,
    shared,
    async ping() {
      try {
        await knex.raw('select 1');
        return true;
      } catch {
        return false;
      }
    },
    close: () => knex.destroy(),
  };
}

/**
 * Runs knex's migrator while holding a PostgreSQL advisory lock named after the service's migrations.
 * knex alone fails every process but one when several start on a fresh database (they race to create its
 * tables) or while another migrates ("Migration table is already locked"), and a process killed while
 * migrating leaves its lock row set for good, so that no process of the service starts again. The
 * advisory lock makes the others wait instead, and dies with its holder's connection; whoever holds it is
 * the only migrator, so a lock row it finds set is stale and is freed. The lock's transaction holds one
 * pool connection while knex migrates on another: a pool needs at least two.
 */
async function oneMigratorAtATime<T>(knex: Knex, tableName: string, migrate: () => Promise<T>): Promise<T> {
  return knex.transaction(async (trx) => {
    await trx.raw('select pg_advisory_xact_lock(hashtext(?))', [tableName]);
    await knex.migrate.forceFreeMigrationsLock({ tableName });
    return migrate();
  });
}

/**
 * knex-pglite names a statement's kind after knex's method, and knex's is `del` for a delete: knex's
 * PostgreSQL reader knows no `DEL`, so `delete()` resolved to the driver's result object instead of the
 * number of rows deleted (on the embedded database, a deleted account or scene read as none deleted).
 */
class EmbeddedClient extends (ClientPgLite as unknown as new (config: object) => { processResponse(obj: { method?: string }, runner: unknown): unknown }) {
  override processResponse(obj: { method?: string }, runner: unknown): unknown {
    return super.processResponse(obj.method === 'del' ? { ...obj, method: 'delete' } : obj, runner);
  }
}

async function embedded(directory: string): Promise<Knex> {
  mkdirSync(directory, { recursive: true });
  // Ready before knex sees it: a first start creates the cluster in WebAssembly, which on a busy machine
  // takes longer than the pool's 30 s limit for creating a connection (knex-pglite allows no pool settings).
  const pglite = new PGlite(directory, { extensions: { pg_trgm } });
  await pglite.waitReady;
  return knexFactory({
    client: EmbeddedClient as unknown as typeof knexFactory.Client,
    // The single connection is held by long transactions such as the seed: waiting for it must not time
    // out as fast as a pooled server's.
    acquireConnectionTimeout: 600_000,
    dialect: 'postgres',
    connection: () => ({ pglite }) as object,
  } as Knex.Config);
}

/**
 * `column` (a timestamptz) as `position_at`: UTC to the microsecond, `YYYY-MM-DDTHH:MI:SS.ffffffZ`, the time of
 * a keyset position (an account export's, services/kit/src/http/account-data.ts). A JavaScript Date would cut
 * it to the millisecond, and the next page would then begin among rows already given.
 */
export function positionTime(knex: Knex, column: string): Knex.Raw {
  return knex.raw(`to_char(?? at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as position_at`, [column]);
}

/**
 * `query` oldest first, after `after`: ordered by `order` (SQL expressions of this service's own columns, the
 * creation time first, then what makes a row unique), and past the row whose values of them `after` holds.
 */
export function oldestFirst<Q extends Knex.QueryBuilder>(query: Q, order: readonly string[], after: readonly (string | number)[] | undefined): Q {
  if (after) query.whereRaw(`(${order.join(', ')}) > (${order.map(() => '?').join(', ')})`, [...after]);
  query.orderByRaw(order.join(', '));
  return query;
}
