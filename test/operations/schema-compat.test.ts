// docs/operations.md, "Upgrades and rollbacks": version N's pods run on N+1's schema. The previous release
// (a commit, schema-compat.json) is extracted from git history and run as it was released, its own
// `npm start` through its own test harness, beside the current platform on one fresh database the current
// services migrated and one Redis: a rolling upgrade half done, or a `helm rollback` just made. A user goes
// through the previous release's gateway (sign-in, the graph, a scene sync and async, a simulation, the
// credits), and what each release writes the other reads. A static rule keeps the migrations added since
// that release to expansions, unless the contract list says what they waited for.
import assert from 'node:assert/strict';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { pathToFileURL } from 'node:url';
import pg from 'pg';
import { type Migration, openDatabase } from '../../services/kit/src/data/database.ts';
import { createLogger } from '../../services/kit/src/observability/logger.ts';
import { DEFAULT_PORTS, type ServiceName } from '../../services/kit/src/runtime/config.ts';
import { createDatabase, dropDatabase } from '../support/database.ts';
import { request } from '../support/http.ts';
import { type Platform, startPlatform } from '../support/platform.ts';
import { contractions, dependencyMismatches, extractRelease, fileAt, isAncestor, migrationNames, RELEASES, requireCommit } from './schema-compat-release.ts';

const SERVICES = Object.keys(DEFAULT_PORTS) as ServiceName[];
const PREVIOUS = RELEASES.previous.commit;
const WRITER = { authorization: 'Bearer dev-writer-token' };
const BASTILLE = '/1789/july/14/1530/france/ile-de-france/paris/storming-of-the-bastille';
const MONARCHY = '/1792/august/10/0900/france/ile-de-france/paris/insurrection-of-10-august';
const EXECUTION = '/1793/january/21/1020/france/ile-de-france/paris/execution-of-louis-xvi';

const currentMigrations = async (service: ServiceName) =>
  ((await import(`../../services/${service}/src/migrations.ts`)) as { migrations: Migration[] }).migrations;
const previousMigrations = (service: ServiceName) => migrationNames(fileAt(PREVIOUS, `services/${service}/src/migrations.ts`));

/** Every migration the current services have that the previous release did not, by service. */
async function addedSincePrevious(): Promise<Array<{ service: ServiceName; migration: Migration }>> {
  const added: Array<{ service: ServiceName; migration: Migration }> = [];
  for (const service of SERVICES) {
    const before = new Set(previousMigrations(service));
    for (const migration of await currentMigrations(service)) if (!before.has(migration.name)) added.push({ service, migration });
  }
  return added;
}

describe('operations: migrations since the previous release only expand (schema-compat.json)', () => {
  before(() => requireCommit(PREVIOUS));

  it('says to fetch the history when a release is not in the clone', () => {
    assert.throws(() => requireCommit('0'.repeat(40)), /is not in this clone: fetch the full history/);
  });

  it("keeps the previous release's migrations first and in order, in every service", async () => {
    for (const service of SERVICES) {
      const before = previousMigrations(service);
      assert.deepEqual(
        (await currentMigrations(service)).slice(0, before.length).map((m) => m.name),
        before,
        `${service}: the previous release's migrations, unchanged, come first`,
      );
    }
  });

  it('finds no drop, rename, type change or new NOT NULL without a default in them, unless listed as a contract whose wait is over', async () => {
    const added = await addedSincePrevious();
    assert.ok(added.length > 0, `the previous release (${PREVIOUS}) predates a migration, or this test covers none`);
    for (const { service, migration } of added) {
      const contract = RELEASES.contract.find((c) => c.service === service && c.migration === migration.name);
      if (!contract)
        assert.deepEqual(contractions(migration.up.toString()), [], `${service} ${migration.name} narrows the schema the previous release runs on`);
      else {
        requireCommit(contract.after);
        assert.ok(
          isAncestor(contract.after, PREVIOUS),
          `${service} ${migration.name} contracts: it may ship only once ${contract.after} (the release that stopped using what it removes) is the previous release or older`,
        );
      }
    }
    for (const c of RELEASES.contract)
      assert.ok(
        added.some((a) => a.service === c.service && a.migration.name === c.migration),
        `the contract list names ${c.service} ${c.migration}, which is no migration added since the previous release`,
      );
  });

  it('tells a contraction from an expansion', async () => {
    // The one migration docs/operations.md marks as not safe for the code before it, the listed contraction,
    // and today's expansions.
    const gateway = await currentMigrations('gateway');
    assert.deepEqual(contractions(gateway.find((m) => m.name === '005_charged_jobs_per_user')!.up.toString()), ['DROP CONSTRAINT']);
    assert.deepEqual(contractions(gateway.find((m) => m.name === '007_drop_export_staging')!.up.toString()), ['knex dropTableIfExists()']);
    const contracting = new Set(['gateway 005_charged_jobs_per_user', ...RELEASES.contract.map((c) => `${c.service} ${c.migration}`)]);
    for (const service of SERVICES)
      for (const migration of await currentMigrations(service))
        if (!contracting.has(`${service} ${migration.name}`)) assert.deepEqual(contractions(migration.up.toString()), [], `${service} ${migration.name}`);
    const cases: Array<[string, string[]]> = [
      [`knex.schema.alterTable('t', (table) => { table.dropColumn('a'); })`, ['knex dropColumn()']],
      [`knex.schema.renameTable('a', 'b')`, ['a rename']],
      [`knex.raw('alter table t rename column a to b')`, ['a rename']],
      [`knex.raw('alter table t alter column a type bigint')`, ['a changed column type']],
      [`knex.schema.alterTable('t', (table) => { table.text('a').notNullable().alter(); })`, ['a column redefined (knex alter())']],
      [`knex.raw('alter table t alter column a set not null')`, ['SET NOT NULL on a without a default']],
      [`knex.raw('alter table t alter column a set default 0, alter column a set not null')`, []],
      [`knex.raw('alter table t alter column a drop not null')`, []],
      [`knex.raw('alter table t add column a int not null')`, ['NOT NULL column a without a default']],
      [`knex.raw('alter table t add column a int not null default 0')`, []],
      [`knex.schema.alterTable('t', (table) => { table.integer('a').notNullable(); table.text('b'); })`, ['NOT NULL column a without a default']],
      [`knex.schema.createTable('t', (table) => { table.integer('a').notNullable(); })`, []],
      [`// this used to drop table x\nknex.raw('delete from t where a is null')`, []],
    ];
    for (const [up, expected] of cases) assert.deepEqual(contractions(up), expected, up);
  });
});

describe('operations: the previous release on the current schema (a rolling upgrade, a helm rollback)', function () {
  this.timeout(6 * 60_000);
  let release: ReturnType<typeof extractRelease> | undefined;
  let database: string | undefined;
  let current: Platform | undefined;
  let previous: Platform | undefined;
  let previousJob: string | undefined;
  let auth: Record<string, string> = {};
  const ids: { scene?: string; run?: string } = {};

  before(async () => {
    release = extractRelease(PREVIOUS);
    assert.deepEqual(
      dependencyMismatches(release.root),
      [],
      "the previous release's package-lock.json pins each third-party package at this checkout's version",
    );
    database = await createDatabase('schema_compat');
    // The current schema first, as the first pod of the upgrade leaves it (the kit's own migrator).
    for (const service of SERVICES) {
      const opened = await openDatabase({
        service,
        url: database,
        dataDir: tmpdir(),
        migrations: await currentMigrations(service),
        logger: createLogger(service, 'silent'),
      });
      await opened.close();
    }
    // Then both releases at once, on one signing key and one Redis key prefix: one platform mid-rollout.
    // No seed: the graph's moments are written by each release below.
    const env = {
      JWT_PRIVATE_KEY: generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ type: 'pkcs8', format: 'pem' }) as string,
      REDIS_KEY_PREFIX: `tempora-${randomBytes(4).toString('hex')}`,
      RATE_LIMIT_MULTIPLIER: '100',
      GRAPH_SEED: 'false',
    };
    const shared = { databaseUrl: database, redisUrl: process.env.REDIS_URL! };
    // The previous release's own harness runs its own `npm start` from its own tree.
    const harness = (await import(pathToFileURL(join(release.root, 'test', 'support', 'platform.ts')).href)) as typeof import('../support/platform.ts');
    const [now, then] = await Promise.allSettled([startPlatform({ shared, env }), harness.startPlatform({ shared, env })]);
    if (now.status === 'fulfilled') current = now.value;
    if (then.status === 'fulfilled') previous = then.value;
    for (const started of [now, then]) if (started.status === 'rejected') throw started.reason;
  });

  after(async () => {
    await previous?.stop();
    await current?.stop();
    if (database) await dropDatabase(database).catch(() => undefined);
    release?.remove();
  });

  async function ok<T = any>(base: string, path: string, init: Parameters<typeof request>[2] = {}): Promise<T> {
    const reply = await request<T>(base, path, { ...init, headers: { ...auth, ...init.headers } });
    assert.ok(reply.status < 300, `${base}${path}: ${reply.status} ${JSON.stringify(reply.body).slice(0, 500)}`);
    return reply.body;
  }

  async function finished(base: string, job: string): Promise<{ status: string; timepoint_url: string | null }> {
    for (const until = Date.now() + 60_000; Date.now() < until; await sleep(250)) {
      const answer = await ok<{ status: string; timepoint_url: string | null }>(base, `/api/v1/timepoints/jobs/${job}`);
      if (answer.status === 'completed' || answer.status === 'failed') return answer;
    }
    throw new Error(`job ${job} did not finish within a minute`);
  }

  async function query<T>(sql: string, values: unknown[] = []): Promise<T[]> {
    const client = new pg.Client({ connectionString: database });
    await client.connect();
    try {
      return (await client.query(sql, values)).rows as T[];
    } finally {
      await client.end();
    }
  }

  it("migrated the fresh database with every current service's migrations", async () => {
    for (const service of SERVICES) {
      const applied = (await query<{ name: string }>(`select name from ${service}_migrations order by id`)).map((row) => row.name);
      assert.deepEqual(
        applied,
        (await currentMigrations(service)).map((m) => m.name),
        service,
      );
    }
  });

  it('starts the previous release on that schema, which names the migrations it does not know', async () => {
    const output = previous!.output();
    const added = await addedSincePrevious();
    assert.match(output, /the database holds migrations of a newer release/);
    for (const { migration } of added) assert.ok(output.includes(migration.name), `the previous release names ${migration.name}:\n${output.slice(-3000)}`);
  });

  it("serves a user through the previous release's gateway: sign-in, the graph, scenes sync and async, a simulation, credits", async () => {
    const gateway = previous!.urls.gateway;
    auth = { authorization: `Bearer ${(await ok<{ access_token: string }>(gateway, '/api/v1/auth/demo', { body: {} })).access_token}` };
    // A moment and its consequence written by the current graph, traversed by the previous one.
    await ok(current!.urls.graph, '/ingest/tdf', {
      headers: WRITER,
      body: [
        { payload: { path: BASTILLE, event_name: 'The storming of the Bastille', layer: 0 } },
        { payload: { path: MONARCHY, event_name: 'The fall of the French monarchy', layer: 0, edges: [{ target: BASTILLE, type: 'caused_by', weight: 0.8 }] } },
      ],
    });
    const traversal = await ok<{ node_count: number }>(gateway, `/api/v1/graph/traverse${BASTILLE}?direction=future&depth=1`);
    assert.equal(traversal.node_count, 2, JSON.stringify(traversal).slice(0, 500));
    ids.scene = (await ok<{ id: string }>(gateway, '/api/v1/timepoints/generate/sync', { body: { query: 'The storming of the Bastille, 1789' } })).id;
    previousJob = (await ok<{ job_id: string }>(gateway, '/api/v1/timepoints/generate', { body: { query: 'The Congress of Vienna opens, 1814' } })).job_id;
    const job = await finished(gateway, previousJob);
    assert.equal(job.status, 'completed', JSON.stringify(job));
    await ok(gateway, job.timepoint_url!);
    const run = await ok<{ id?: string; run?: { id: string; status: string } }>(gateway, '/api/v1/simulate?wait=30', {
      body: { prompt: 'A council in Vienna weighs war with the Ottomans, 1683', mode: 'FORWARD', fidelity: 1 },
    });
    ids.run = run.run?.id ?? run.id!;
    assert.equal((await ok<{ status: string }>(gateway, `/api/v1/simulations/${ids.run}`)).status, 'completed');
    const history = await ok<{ items: Array<{ amount: number; kind: string }> }>(gateway, '/api/v1/credits/history?limit=100');
    const { balance } = await ok<{ balance: number }>(gateway, '/api/v1/credits/balance');
    assert.equal(history.items.filter((entry) => entry.kind === 'charge').length, 3, 'a charge for each scene and the simulation');
    assert.equal(
      history.items.reduce((sum, entry) => sum + entry.amount, 0),
      balance,
      'the balance is the sum of the ledger',
    );
  });

  it('reads what each release wrote with the other: leased jobs, unleased jobs, scenes, runs, credits', async () => {
    assert.ok(previousJob && ids.scene && ids.run, 'the previous test wrote them');
    const [then, now] = [previous!.urls.gateway, current!.urls.gateway];
    // The current release's job holds a lease; the previous release reads it as any job.
    const currentJob = (await ok<{ job_id: string }>(now, '/api/v1/timepoints/generate', { body: { query: 'The fall of the Berlin Wall, 1989' } })).job_id;
    assert.equal((await finished(now, currentJob)).status, 'completed');
    const seenThen = await finished(then, currentJob);
    assert.equal(seenThen.status, 'completed');
    await ok(then, seenThen.timepoint_url!);
    // The previous release's job left the lease columns at their defaults; the current release reads it.
    const rows = await query<{ id: string; lease_token: string | null; attempts: number }>(
      'select id, lease_token, attempts from generation_jobs where id = any($1)',
      [[previousJob, currentJob]],
    );
    assert.deepEqual(Object.fromEntries(rows.map(({ id, lease_token, attempts }) => [id, { leased: lease_token !== null, attempts }])), {
      [previousJob]: { leased: false, attempts: 0 },
      [currentJob]: { leased: true, attempts: 1 },
    });
    assert.equal((await finished(now, previousJob)).status, 'completed');
    // A moment written by the previous graph, a consequence of one the current graph wrote, traversed by the current one.
    await ok(previous!.urls.graph, '/ingest/tdf', {
      headers: WRITER,
      body: { payload: { path: EXECUTION, event_name: 'The execution of Louis XVI', layer: 0, edges: [{ target: MONARCHY, type: 'caused_by', weight: 0.9 }] } },
    });
    const traversal = await ok<{ node_count: number }>(now, `/api/v1/graph/traverse${BASTILLE}?direction=future&depth=2`);
    assert.equal(traversal.node_count, 3, JSON.stringify(traversal).slice(0, 500));
    // What the previous release answers, the current one answers too (it may add fields).
    for (const path of [
      `/api/v1/timepoints/${ids.scene}`,
      `/api/v1/simulations/${ids.run}`,
      `/api/v1/simulations/${ids.run}/result`,
      '/api/v1/credits/history?limit=100',
    ])
      assert.partialDeepStrictEqual(await ok(now, path), await ok(then, path), path);
  });
});
