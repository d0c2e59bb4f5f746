import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createDatabase, dropDatabase } from '../../../test/support/database.ts';
import { type Database, type Migration, openDatabase } from '../src/data/index.ts';
import { createLogger } from '../src/observability/logger.ts';

/**
 * Several processes of one service start together on a fresh shared database (a Deployment's replicas, a
 * GraphWorker beside its service), and one may be killed while it migrates (a probe, an eviction).
 */
describe('openDatabase on shared PostgreSQL: migrations across processes', function () {
  this.timeout(60_000);
  const logger = createLogger('kit-test', 'silent');
  let url = '';
  const opened: Database[] = [];
  const slowMigration: Migration = {
    name: '0001_things',
    async up(knex) {
      await knex.schema.createTable('things', (t) => t.increments('id'));
      // Long enough for every other process to arrive while it runs.
      await knex.raw('select pg_sleep(0.3)');
    },
    async down(knex) {
      await knex.schema.dropTable('things');
    },
  };
  const open = async () => {
    const db = await openDatabase({ service: 'kittest', url, dataDir: '/nonexistent', migrations: [slowMigration], logger });
    opened.push(db);
    return db;
  };

  beforeEach(async () => {
    url = await createDatabase('kit_migrate');
  });
  afterEach(async () => {
    await Promise.all(opened.splice(0).map((db) => db.close()));
    await dropDatabase(url);
  });

  it('eight processes starting at once all open it, and the migration runs once', async () => {
    const dbs = await Promise.all(Array.from({ length: 8 }, open));
    const rows = await dbs[0]!.knex('kittest_migrations').select('name');
    assert.deepEqual(
      rows.map((r) => r.name),
      ['0001_things'],
    );
  });

  it('opens a database a newer release migrated further (a rollback), and names what it does not know', async () => {
    const added: Migration = {
      name: '0002_more_things',
      async up(knex) {
        await knex.schema.alterTable('things', (t) => t.text('label'));
      },
      async down(knex) {
        await knex.schema.alterTable('things', (t) => t.dropColumn('label'));
      },
    };
    opened.push(await openDatabase({ service: 'kittest', url, dataDir: '/nonexistent', migrations: [slowMigration, added], logger }));
    const warnings: unknown[] = [];
    const listening = createLogger('kit-test', 'warn');
    listening.warn = ((fields: unknown) => void warnings.push(fields)) as typeof listening.warn;
    const older = await openDatabase({ service: 'kittest', url, dataDir: '/nonexistent', migrations: [slowMigration], logger: listening });
    opened.push(older);
    await older.knex('things').insert({});
    assert.deepEqual(warnings, [{ ahead: ['0002_more_things'] }]);
  });

  it('a lock left by a process killed while migrating does not keep the next one from starting', async () => {
    const first = await open();
    // What knex leaves behind when its process dies between taking its lock and freeing it.
    await first.knex('kittest_migrations_lock').update({ is_locked: 1 });
    const second = await open();
    assert.ok(await second.ping());
    assert.deepEqual(await second.knex('kittest_migrations_lock').select('is_locked'), [{ is_locked: 0 }]);
  });
});

describe('openDatabase embedded (PGlite, npm start): statements answer as on PostgreSQL', function () {
  this.timeout(60_000);
  let db: Database;
  let dir = '';
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'kit-embedded-'));
    const things: Migration = {
      name: '0001_things',
      up: (knex) => knex.schema.createTable('things', (t) => t.increments('id')),
      down: (knex) => knex.schema.dropTable('things'),
    };
    db = await openDatabase({ service: 'kittest', url: undefined, dataDir: dir, migrations: [things], logger: createLogger('kit-test', 'silent') });
  });
  after(async () => {
    await db.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('delete() and update() resolve to the number of rows they touched', async () => {
    await db.knex('things').insert([{ id: 1 }, { id: 2 }, { id: 3 }]);
    assert.equal(
      await db
        .knex('things')
        .where('id', '>', 1)
        .update({ id: db.knex.raw('id + 10') }),
      2,
    );
    assert.equal(await db.knex('things').where('id', '>', 10).delete(), 2);
    assert.equal(await db.knex('things').where('id', '>', 10).delete(), 0);
  });
});
