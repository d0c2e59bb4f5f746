// The restore drill of docs/operations.md: a platform as `npm start` runs it on a fresh database of the test
// PostgreSQL, with data in every service put there through the gateway (a demo user's charges, a pack
// bought through the Stripe stand-in, a scene, a simulation run, a conductor conversation, a moment
// ingested into the graph), backed up with the page's pg_dump command, stopped; the dump restored with the
// page's pg_restore command into a new database owned by a role that is no superuser (as CloudNativePG's
// app role is), and a new platform started on it with the same signing key. Everything reads the same.
import assert from 'node:assert/strict';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { createDatabase, dropDatabase } from '../support/database.ts';
import { request } from '../support/http.ts';
import { type Platform, startPlatform } from '../support/platform.ts';
import { waitFor } from '../support/wait.ts';
import { block, runBlock } from './operations-doc.ts';

const PG_BIN = '/usr/lib/postgresql/15/bin';
const WRITER = { authorization: 'Bearer dev-writer-token' };
const BASTILLE = '/1789/july/14/1530/france/ile-de-france/paris/storming-of-the-bastille';
const OWN_MOMENT = '/1900/july/19/1300/france/ile-de-france/paris/paris-metro-line-1-opens';

async function adminQuery(sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: process.env.DATABASE_URL });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

interface LedgerEntry {
  id: number;
  amount: number;
  balance_after: number;
  kind: string;
}

/** What the drill reads from a platform, before the backup and after the restore. */
interface Reads {
  balance: number;
  ledger: LedgerEntry[];
  billingHistory: unknown;
  scene: unknown;
  run: unknown;
  result: unknown;
  conversation: unknown;
  bastilleFuture: unknown;
  ownMoment: unknown;
}

describe('operations: backup and restore drill (docs/operations.md)', function () {
  this.timeout(6 * 60_000);
  const signingKey = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ type: 'pkcs8', format: 'pem' }) as string;
  const role = `restorer_${randomBytes(4).toString('hex')}`;
  const dir = mkdtempSync(join(tmpdir(), 'tempora-restore-'));
  let platform: Platform | undefined;
  let source: string | undefined;
  let target: string | undefined;

  after(async () => {
    await platform?.stop();
    for (const url of [source, target]) if (url) await dropDatabase(url).catch(() => undefined);
    await adminQuery(`drop role if exists ${role}`).catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
  });

  // The drill reads more than a free account may in a minute: the limits are raised, not what is tested.
  const start = (databaseUrl: string) =>
    startPlatform({ shared: { databaseUrl, redisUrl: process.env.REDIS_URL! }, env: { JWT_PRIVATE_KEY: signingKey, RATE_LIMIT_MULTIPLIER: '100' } });

  async function ok<T = any>(path: string, init: Parameters<typeof request>[2] = {}, base = platform!.urls.gateway): Promise<T> {
    const reply = await request<T>(base, path, init);
    assert.ok(
      reply.status < 300,
      `${init.method ?? (init.body === undefined ? 'GET' : 'POST')} ${path}: ${reply.status} ${JSON.stringify(reply.body).slice(0, 500)}`,
    );
    return reply.body;
  }

  async function ledger(auth: Record<string, string>): Promise<LedgerEntry[]> {
    const entries: LedgerEntry[] = [];
    for (let offset = 0; ; offset += 100) {
      const page = await ok<{ items: LedgerEntry[]; total: number }>(`/api/v1/credits/history?limit=100&offset=${offset}`, { headers: auth });
      entries.push(...page.items);
      if (entries.length >= page.total || page.items.length === 0) return entries;
    }
  }

  async function reads(auth: Record<string, string>, ids: { scene: string; run: string; conversation: string }): Promise<Reads> {
    const graph = platform!.urls.graph;
    return {
      balance: (await ok<{ balance: number }>('/api/v1/credits/balance', { headers: auth })).balance,
      ledger: await ledger(auth),
      billingHistory: await ok('/api/v1/billing/history?limit=100', { headers: auth }),
      scene: await ok(`/api/v1/timepoints/${ids.scene}`, { headers: auth }),
      run: await ok(`/api/v1/simulations/${ids.run}`, { headers: auth }),
      result: await ok(`/api/v1/simulations/${ids.run}/result`, { headers: auth }),
      conversation: await ok(`/api/v1/conductor/conversations/${ids.conversation}`, { headers: auth }),
      // Causal edges of the seed, two hops into the future: answered from the in-memory index once loaded.
      bastilleFuture: await ok(`/api/v1/graph/traverse${BASTILLE}?direction=future&depth=2`, { headers: { 'x-service-key': 'dev-service-key' } }, graph),
      // The graph's workers go on working on it after the restore (its layer and description may grow): its identity.
      ownMoment: await ok<{ path: string; event_name: string; source_type: string }>(`/api/v1/moments${OWN_MOMENT}`, { headers: WRITER }, graph).then(
        ({ path, event_name, source_type }) => ({ path, event_name, source_type }),
      ),
    };
  }

  it('restores a platform whose ledger reconciles, whose graph index is rebuilt and whose runs, scenes and conversations read the same', async function () {
    source = await createDatabase('restore_source');
    const started = Date.now();
    platform = await start(source);

    // A demo user, who spends credits on a scene and a simulation and buys the starter pack.
    const signedIn = await ok<{ access_token: string; refresh_token: string }>('/api/v1/auth/demo', { body: {} });
    const auth = { authorization: `Bearer ${signedIn.access_token}` };
    const scene = await ok<{ id: string }>('/api/v1/timepoints/generate/sync', { body: { query: 'The storming of the Bastille, 1789' }, headers: auth });
    const run = await ok<{ id?: string; run?: { id: string } }>('/api/v1/simulate?wait=30', {
      body: { prompt: 'A council in Vienna weighs war with the Ottomans, 1683', mode: 'FORWARD', fidelity: 1 },
      headers: auth,
    });
    const runId = run.run?.id ?? run.id!;
    const message = await ok<{ conversation_id: string }>('/api/v1/conductor/messages', {
      body: { content: 'What led from the Bastille to Waterloo?' },
      headers: auth,
    });
    const before = (await ok<{ balance: number }>('/api/v1/credits/balance', { headers: auth })).balance;
    const session = await ok<{ id: string }>('/api/v1/billing/checkout', { body: { kind: 'pack', id: 'starter' }, headers: auth });
    await ok(`/_stand_in/pay/${session.id}`, { method: 'POST' }, platform.stripe);
    await waitFor(
      'the pack credited',
      async () => ((await ok<{ balance: number }>('/api/v1/credits/balance', { headers: auth })).balance === before + 100 ? true : undefined),
      { timeoutMs: 60_000 },
    );
    // The graph: a moment of one's own beside the seed.
    await ok(
      '/ingest/tdf',
      { body: { payload: { path: OWN_MOMENT, event_name: 'Line 1 of the Paris Métro opens', layer: 0 } }, headers: WRITER },
      platform.urls.graph,
    );
    const ids = { scene: scene.id, run: runId, conversation: message.conversation_id };
    const original = await reads(auth, ids);
    assert.ok(
      original.ledger.some((e) => e.kind === 'charge') && original.ledger.some((e) => e.kind === 'grant'),
      `charges and the pack's grant in the ledger: ${JSON.stringify(original.ledger)}`,
    );

    // Back up with the page's command while the platform runs, then stop it.
    const env = { ...process.env, PATH: `${PG_BIN}:${process.env.PATH}` };
    runBlock(block('pg_dump'), { cwd: dir, env: { ...env, DATABASE_URL: source } });
    assert.ok(statSync(join(dir, 'tempora.dump')).size > 100_000, 'a dump of the seeded graph and the rest');
    await platform.stop();
    platform = undefined;

    // Restore into a new, empty database owned by a role that is no superuser.
    await adminQuery(`create role ${role} login`);
    target = await createDatabase('restore_target');
    await adminQuery(`alter database ${new URL(target).pathname.slice(1)} owner to ${role}`);
    const asRole = new URL(target);
    asRole.username = role;
    runBlock(block('pg_restore'), { cwd: dir, env: { ...env, DATABASE_URL: asRole.toString() } });

    platform = await start(target);
    await waitFor(
      'the graph index loaded',
      async () => ((await request(platform!.urls.graph, '/health')).body as { index?: string }).index === 'loaded' || undefined,
      { timeoutMs: 60_000 },
    );

    // The access token issued before the backup still verifies (the signing key was kept); so does the refresh token.
    const restored = await reads(auth, ids);
    assert.equal(restored.balance, original.balance, 'the balance');
    assert.deepEqual(restored.ledger, original.ledger, 'the ledger, entry by entry');
    assert.equal(
      restored.ledger.reduce((sum, e) => sum + e.amount, 0),
      restored.balance,
      'the balance is the sum of the ledger entries',
    );
    assert.equal(restored.ledger[0]!.balance_after, restored.balance, 'the newest entry ends at the balance');
    assert.deepEqual(restored.billingHistory, original.billingHistory, 'the billing history');
    assert.deepEqual(restored.scene, original.scene, 'the scene');
    assert.deepEqual(restored.run, original.run, 'the simulation run');
    assert.deepEqual(restored.result, original.result, 'the simulation result');
    assert.deepEqual(restored.conversation, original.conversation, 'the conversation');
    assert.deepEqual(restored.bastilleFuture, original.bastilleFuture, "the Bastille's future, from the rebuilt index");
    assert.deepEqual(restored.ownMoment, original.ownMoment, 'the moment ingested before the backup');
    const refreshed = await ok<{ access_token: string }>('/api/v1/auth/refresh', { body: { refresh_token: signedIn.refresh_token } });
    assert.equal(
      (await ok<{ balance: number }>('/api/v1/credits/balance', { headers: { authorization: `Bearer ${refreshed.access_token}` } })).balance,
      original.balance,
    );
    console.log(`      (drill took ${Math.round((Date.now() - started) / 1000)} s)`);
  });
});
