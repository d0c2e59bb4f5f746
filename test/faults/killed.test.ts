import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { freePort } from '../../scripts/infra.ts';
import { FakeGeneration } from '../../services/graph/test/fake-generation.ts';
import { createDatabase, dropDatabase } from '../support/database.ts';
import { call, json, Proc } from './support.ts';

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
      const port = await freePort();
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
      const graph = start('services/graph/src/main.ts', { ...env, PORT: String(port) });
      await graph.said(/graph service listening/, 90_000);
      const first = start('services/graph/src/worker.ts', env, ['renderer']);
      // The first render is slow: the renderer is killed holding it.
      generation.delayMs = 3_000;
      const base = `http://127.0.0.1:${port}`;
      const writer = { authorization: 'Bearer faults-writer-token' };
      const queued = await call('generate', `${base}/generate`, json(writer, { path: '/1903/july/1/1516/france/ile-de-france/montgeron/first-tour-de-france', event_name: 'The first Tour de France sets off' }));
      assert.ok(queued.status < 300, JSON.stringify(queued.body));
      const jobId = queued.body.job.id as string;
      const deadline = Date.now() + 60_000;
      while (generation.calls.length === 0 && Date.now() < deadline) await sleep(50);
      assert.equal(generation.calls.length, 1, `the first renderer called generation:\n${first.output.slice(-2000)}`);
      await first.kill();
      const killedAt = Date.now();
      generation.delayMs = 0;
      const second = start('services/graph/src/worker.ts', env, ['renderer']);
      let job: any;
      while (Date.now() < killedAt + 40_000) {
        job = (await call('job', `${base}/api/v1/graph/jobs/${jobId}`, { headers: writer })).body;
        if (job.status === 'succeeded' || job.status === 'failed') break;
        await sleep(250);
      }
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
