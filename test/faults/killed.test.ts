import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { createDatabase, dropDatabase } from '../support/database.ts';
import { FakeGeneration } from '../support/stand-ins/generation.ts';
import { waitFor } from '../support/wait.ts';
import { ADMIN, call, json, Proc, telling, user } from './support.ts';

/**
 * Processes killed with SIGKILL while they hold work: nothing they held is lost or done twice. Each
 * service runs as its own process on the test PostgreSQL (a fresh database) and Redis (its own prefix).
 */
describe('faults: a process killed (SIGKILL) while it holds work', function () {
  this.timeout(120_000);
  const procs: Proc[] = [];
  const start = (script: string, env: NodeJS.ProcessEnv, args: string[] = []) => {
    const proc = new Proc(script, env, args);
    procs.push(proc);
    return proc;
  };
  afterEach(async () => {
    for (const proc of procs.splice(0)) await proc.kill('SIGTERM');
  });

  // An agent pool worker killed mid-task: services/generation/test/pool.test.ts (redelivered, answered
  // once); a simulation service killed mid-run: services/simulation/test/runs.test.ts (resumed from its
  // last step, budget settled once). Both kill real processes with SIGKILL.

  describe('a gateway holding a charged call', () => {
    let database: string;
    let generation: Server;
    let held = 0;
    before(async () => {
      database = await createDatabase('faults_gateway');
      // A generation service that takes every render and never answers: the call is in flight when the gateway dies.
      generation = createServer((req) => {
        if (req.method === 'POST') held += 1;
      });
      await new Promise<void>((resolve) => generation.listen(0, '127.0.0.1', resolve));
    });
    after(async () => {
      generation.closeAllConnections();
      await new Promise((resolve) => generation.close(resolve));
      await dropDatabase(database);
    });

    it('leaves the charge open in the database; another replica refunds it once past its settle-by time, once', async () => {
      // Each replica on a port of its own, bound at once: the next one is another replica, not the same address.
      const env: NodeJS.ProcessEnv = {
        PORT: '0',
        METRICS_PORT: '0',
        DATABASE_URL: database,
        REDIS_URL: process.env.REDIS_URL,
        REDIS_KEY_PREFIX: `faults-${randomBytes(4).toString('hex')}`,
        SERVICE_KEY: 'faults-service-key',
        ADMIN_KEY: ADMIN['X-Admin-Key'],
        GENERATION_URL: `http://127.0.0.1:${(generation.address() as AddressInfo).port}`,
        // Settle-by 4 s after the charge (its call cut off at 3 s, its settlement retried 1 s more); swept every 250 ms.
        CHARGED_CALL_MAX_MS: '3000',
        CHARGE_SETTLE_GRACE_MS: '1000',
        CHARGED_JOB_CHECK_MS: '250',
        OTEL_SDK_DISABLED: 'true',
      };
      const first = start('services/gateway/src/main.ts', env);
      const base = await first.listening('gateway', 90_000);
      const buyer = await user(base, 'pro');
      const before = (await call('balance', `${base}/api/v1/credits/balance`, { headers: buyer.auth })).body.balance as number;
      const pending = call('generate', `${base}/api/v1/timepoints/generate/sync`, json(buyer.auth, { query: 'The fall of Constantinople, 1453' }), 30_000);
      const firstSaid = () => first.output.slice(-2000);
      await telling(
        waitFor('the call to reach generation', () => held > 0, { timeoutMs: 30_000, intervalMs: 25 }),
        firstSaid,
      );
      assert.equal(held, 1, `one call reached generation:\n${firstSaid()}`);
      await first.kill();
      const killedAt = Date.now();
      assert.equal((await pending).status, 0, 'the client lost its connection with the gateway');
      const second = start('services/gateway/src/main.ts', env);
      const replica = await second.listening('gateway', 90_000);
      const balance = async () => (await call('balance', `${replica}/api/v1/credits/balance`, { headers: buyer.auth })).body.balance as number;
      await telling(
        waitFor('the charge refunded', async () => (await balance()) === before, { timeoutMs: 30_000 - (Date.now() - killedAt), intervalMs: 100 }),
        () => second.output.slice(-2000),
      );
      const refundedMs = Date.now() - killedAt;
      assert.match(second.output, /refunded a charge left open by a stopped replica/);
      // Time itself: a second refund, were there one, would come at the next sweeps (every 250 ms); none may.
      await sleep(1_000);
      const history = (await call('history', `${replica}/api/v1/credits/history`, { headers: buyer.auth })).body.items as Array<{
        kind: string;
        refund_of: string | null;
      }>;
      assert.deepEqual(
        history.slice(0, 2).map((entry) => entry.kind),
        ['refund', 'charge'],
        'one charge, refunded once',
      );
      assert.equal(await balance(), before);
      process.stderr.write(
        `      [faults] gateway killed holding a charged call: refunded by the next replica ${refundedMs} ms after the kill (settle-by 4 s after the charge)\n`,
      );
    });
  });

  describe('a graph renderer in the middle of a render', () => {
    const generation = new FakeGeneration();
    let database: string;
    before(async () => {
      await generation.start();
      database = await createDatabase('faults_graph');
    });
    after(async () => {
      await generation.stop();
      await dropDatabase(database);
    });

    it('is reclaimed once its claim is stale and rendered by the next renderer; the moment gets one scene', async () => {
      const env: NodeJS.ProcessEnv = {
        DATABASE_URL: database,
        REDIS_URL: process.env.REDIS_URL,
        REDIS_KEY_PREFIX: `faults-${randomBytes(4).toString('hex')}`,
        SERVICE_KEY: 'faults-service-key',
        WRITER_TOKENS: 'faults:faults-writer-token',
        GRAPH_SEED: 'false',
        GRAPH_WORKERS: 'none',
        GENERATION_URL: generation.url,
        GENERATION_SERVICE_KEY: 'faults-service-key',
        WORKER_POLL_MS: '200',
        RENDER_TIMEOUT_MS: '4000',
        RENDER_STALE_MS: '5000',
        OTEL_SDK_DISABLED: 'true',
      };
      const graph = start('services/graph/src/main.ts', { ...env, PORT: '0', METRICS_PORT: '0' });
      const base = await graph.listening('graph', 90_000);
      const first = start('services/graph/src/worker.ts', env, ['renderer']);
      // The first render is slow: the renderer is killed holding it.
      generation.delayMs = 3_000;
      const writer = { authorization: 'Bearer faults-writer-token' };
      const queued = await call(
        'generate',
        `${base}/generate`,
        json(writer, { path: '/1903/july/1/1516/france/ile-de-france/montgeron/first-tour-de-france', event_name: 'The first Tour de France sets off' }),
      );
      assert.ok(queued.status < 300, JSON.stringify(queued.body));
      const jobId = queued.body.job.id as string;
      const firstSaid = () => first.output.slice(-2000);
      await telling(
        waitFor('the first renderer to call generation', () => generation.calls.length > 0, { timeoutMs: 60_000 }),
        firstSaid,
      );
      assert.equal(generation.calls.length, 1, `the first renderer called generation once:\n${firstSaid()}`);
      await first.kill();
      const killedAt = Date.now();
      generation.delayMs = 0;
      const second = start('services/graph/src/worker.ts', env, ['renderer']);
      const ended = async () => {
        const { body } = await call('job', `${base}/api/v1/graph/jobs/${jobId}`, { headers: writer });
        return ['succeeded', 'failed'].includes(body.status) && body;
      };
      const job = await telling(waitFor('the job to end', ended, { timeoutMs: 40_000, intervalMs: 250 }), () => second.output.slice(-2000));
      assert.equal(job.status, 'succeeded', `${JSON.stringify(job)}\n${second.output.slice(-2000)}`);
      assert.match(second.output, /reclaimed a render job whose worker stopped/);
      assert.equal(job.attempts, 2, 'claimed twice: once by each renderer');
      const moment = await call('moment', `${base}/api/v1/moments/1903/july/1/1516/france/ile-de-france/montgeron/first-tour-de-france`, { headers: writer });
      assert.equal(moment.body.layer, 2, JSON.stringify(moment.body).slice(0, 300));
      assert.equal(generation.calls.length, 2, 'rendered again once, not more');
      process.stderr.write(`      [faults] renderer killed mid-render: reclaimed and rendered ${Date.now() - killedAt} ms later (stale after 5 s)\n`);
    });
  });
});
