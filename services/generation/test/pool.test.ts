import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { connectRedis, type RedisClient } from '@tempora/kit/data';
import { createLogger } from '@tempora/kit/observability';
import { FakeVendors } from '../../../test/support/stand-ins/model-vendors.ts';
import { waitFor } from '../../../test/support/wait.ts';
import { scrape } from '../../kit/test/metrics-support.ts';
import { EVENT_ORDER } from '../src/agents/types.ts';
import { PoolCoordinator } from '../src/pool/coordinator.ts';
import { fieldsOf, poolKeys, type StreamEntry, streamsOf } from '../src/pool/protocol.ts';
import { type GenerationHarness, QUERY, readSse, startGeneration, vendorEnv } from './harness.ts';

const WORKER = fileURLToPath(new URL('../src/worker.ts', import.meta.url));

interface Worker {
  child: ChildProcess;
  lines: any[];
  exited: boolean;
}

function startWorker(env: Record<string, string>): Worker {
  const child = spawn(process.execPath, [WORKER], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  const worker: Worker = { child, lines: [], exited: false };
  let buffer = '';
  child.stdout!.on('data', (chunk: Buffer) => {
    buffer += chunk.toString();
    let newline: number;
    while ((newline = buffer.indexOf('\n')) >= 0) {
      const line = buffer.slice(0, newline);
      buffer = buffer.slice(newline + 1);
      try {
        worker.lines.push(JSON.parse(line));
      } catch {
        worker.lines.push({ msg: line });
      }
    }
  });
  child.stderr!.on('data', () => {});
  child.once('exit', () => {
    worker.exited = true;
  });
  return worker;
}

const said = (worker: Worker, msg: string) => worker.lines.filter((line) => line.msg === msg);

describe('generation: agent pool on Redis streams', function () {
  this.timeout(60_000);
  const fake = new FakeVendors();
  let gen: GenerationHarness;
  let redis: RedisClient;
  const workers: Worker[] = [];

  before(async () => {
    await fake.start();
    // The service counts a worker live while it was seen within AGENT_POOL_CLAIM_IDLE_MS: short, so a killed one drops out within the test.
    gen = await startGeneration({
      ...vendorEnv(fake, ['native']),
      AGENT_POOL: 'redis',
      AGENT_POOL_NAME: 'agents',
      AGENT_POOL_TASK_TIMEOUT_MS: '20000',
      AGENT_POOL_CLAIM_IDLE_MS: '2000',
    });
    const env = {
      ...vendorEnv(fake, ['native']),
      REDIS_URL: process.env.REDIS_URL as string,
      REDIS_KEY_PREFIX: gen.prefix,
      LOG_LEVEL: 'info',
      OTEL_SDK_DISABLED: 'true',
      AGENT_POOL_CLAIM_IDLE_MS: '600',
      AGENT_POOL_CONCURRENCY: '4',
      PROVIDER_RETRIES: '0',
      PROVIDER_TIMEOUT_MS: '10000',
    };
    workers.push(startWorker(env), startWorker(env));
    await waitFor('every worker started', async () => workers.every((worker) => said(worker, 'agent pool worker started').length === 1), { timeoutMs: 20_000 });
    redis = (await connectRedis(process.env.REDIS_URL, createLogger('test', 'silent')))!;
  });
  after(async () => {
    for (const worker of workers) if (!worker.exited) worker.child.kill('SIGTERM');
    await waitFor('every worker exited', async () => workers.every((worker) => worker.exited), { timeoutMs: 10_000 }).catch(() => {});
    await redis?.quit().catch(() => {});
    await gen.stop();
    await fake.stop();
  });
  beforeEach(() => fake.reset());

  it('runs the whole pipeline as tasks on the workers and streams events in order', async () => {
    const health = await gen.get('/health');
    assert.equal(health.body.agent_pool, 'redis');
    const response = await fetch(`${gen.url}/api/v1/timepoints/generate/stream`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ query: QUERY }),
    });
    const events = await readSse(response);
    assert.deepEqual(
      events.filter((event) => event.event === 'agent').map((event) => event.data.agent),
      EVENT_ORDER,
    );
    assert.equal(events.at(-1)!.event, 'done');
    // Worker logs arrive through pipes, possibly after the result did.
    await waitFor('13 agent tasks finished', async () => workers.reduce((sum, worker) => sum + said(worker, 'agent task finished').length, 0) >= 13, {
      timeoutMs: 10_000,
    });
    assert.equal(events.at(-1)!.data.scene.title, 'The Eagle Has Landed');
  });

  it('redelivers the task of a worker killed mid-run, and exports the queue depth', async () => {
    fake.latencyMs = 400;
    const victim = workers[0]!;
    const survivor = workers[1]!;
    const before = said(victim, 'agent task started').length;
    const depths: number[] = [];
    const sampler = setInterval(() => void gen.instance.runner.depth().then((depth) => depths.push(depth)), 50);
    const pending = gen.post('/api/v1/timepoints/generate/sync', { query: QUERY });
    // Kill the victim while it holds a task (one it started and has not finished).
    await waitFor(
      'the victim holding a task',
      async () => {
        const started = said(victim, 'agent task started').length;
        return started > before && started > said(victim, 'agent task finished').length;
      },
      { timeoutMs: 20_000, intervalMs: 5 },
    );
    victim.child.kill('SIGKILL');
    const reply = await pending;
    clearInterval(sampler);
    assert.equal(reply.status, 200, JSON.stringify(reply.body));
    assert.equal(reply.body.dialog.length, 3);
    assert.ok(said(survivor, 'agent pool: redelivered task claimed').length >= 1, "the survivor claimed the dead worker's task");
    assert.ok(Math.max(...depths) >= 1, 'queue depth was visible while tasks waited');
    const metrics = await scrape(gen);
    assert.match(metrics, /generation_agent_queue_depth\{service="generation"\} \d+/);
    // The series the AgentPool's autoscaler selects by its pool's name (AGENT_POOL_NAME).
    assert.match(metrics, /tempora_generation_queue_depth\{[^}]*pool="agents"[^}]*\} \d+/);
  });

  it("reports the pool's live workers (idle ones included, a dead one gone after the heartbeat window) and its oldest task's age", async () => {
    const alive = workers.filter((worker) => !worker.exited).length;
    // Idle workers are live: no task is running.
    const idle = await waitFor(
      'the pool idle',
      async () => {
        const stats = await gen.instance.runner.stats();
        return stats?.workers === alive && stats.depth === 0 ? stats : undefined;
      },
      { timeoutMs: 10_000, intervalMs: 100 },
    );
    assert.deepEqual(idle, { depth: 0, waiting: 0, oldestAgeSeconds: 0, workers: alive });
    // A scrape reuses the readings of the last second's, so the dead worker may still show in the first one.
    const workersLine = new RegExp(`generation_agent_pool_workers\\{[^}]*pool="agents"[^}]*\\} ${alive}\n`);
    let metrics = await waitFor(
      'the pool workers metric',
      async () => {
        const body = await scrape(gen);
        return workersLine.test(body) ? body : undefined;
      },
      { timeoutMs: 5_000, intervalMs: 250 },
    );
    assert.match(metrics, /generation_agent_pool_oldest_task_age_seconds\{[^}]*pool="agents"[^}]*\} 0\n/);

    fake.latencyMs = 400;
    const ages: number[] = [];
    const sampler = setInterval(() => void gen.instance.runner.stats().then((stats) => ages.push(stats?.oldestAgeSeconds ?? 0)), 50);
    const reply = await gen.post('/api/v1/timepoints/generate/sync', { query: QUERY });
    clearInterval(sampler);
    assert.equal(reply.status, 200, JSON.stringify(reply.body));
    assert.ok(Math.max(...ages) >= 0.3, `the oldest task aged while the vendor answered in 400 ms: ${Math.max(...ages)} s`);
    metrics = await scrape(gen);
    assert.match(metrics, /generation_agent_pool_waiting_tasks\{[^}]*pool="agents"[^}]*\} \d+/);
  });

  it("answers a task entry of another shape with a 'malformed' failure, and drops one it cannot answer", async () => {
    const keys = poolKeys(gen.prefix);
    const replyTo = keys.results('probe');
    // A coordinator of another version, say: an agent this worker does not know, and a brief without its query.
    const task = JSON.stringify({ id: 'probe-task', agent: 'Oracle', brief: { graph_moment: null } });
    const answerable = String(await redis.sendCommand(['XADD', keys.tasks, '*', 'task_id', 'probe-task', 'reply_to', replyTo, 'task', task]));
    const unanswerable = String(await redis.sendCommand(['XADD', keys.tasks, '*', 'task', '{"id":']));
    const [, flat] = await waitFor(
      'the answer on the reply stream',
      async () => streamsOf(await redis.sendCommand(['XREAD', 'STREAMS', replyTo, '0']))[0]?.[1]?.[0],
      { timeoutMs: 10_000, intervalMs: 50 },
    );
    const fields = fieldsOf(flat);
    assert.equal(fields.task_id, 'probe-task');
    const outcome = JSON.parse(fields.outcome!);
    assert.equal(outcome.ok, false);
    assert.equal(outcome.error.code, 'malformed');
    assert.match(outcome.error.message, /agent: .*brief: /);
    // Both are logged at warn with their entries' ids, and neither is left in the stream to go round again.
    const dropped = (entry: string) =>
      workers.flatMap((worker) => said(worker, 'agent pool: malformed task dropped')).find((line) => line.entry === entry && line.level === 40);
    await waitFor('both drops logged', async () => dropped(answerable) && dropped(unanswerable), { timeoutMs: 10_000 });
    assert.match(dropped(unanswerable).mismatch, /not JSON/);
    for (const entry of [answerable, unanswerable]) assert.deepEqual(await redis.sendCommand(['XRANGE', keys.tasks, entry, entry]), []);
    await redis.sendCommand(['DEL', replyTo]);
  });

  it("resolves a call whose outcome is of another shape as a 'malformed' failure", async () => {
    // A coordinator in a namespace no worker reads, so the outcome written here is the only one.
    const prefix = `${gen.prefix}-outcome`;
    const keys = poolKeys(prefix);
    const coordinator = new PoolCoordinator(redis, prefix, 20_000, 2_000, createLogger('generation', 'silent'));
    await coordinator.start();
    try {
      const call = coordinator.run({ id: 'probe-call', agent: 'Judge', brief: { query: QUERY, graph_moment: null } }, new AbortController().signal);
      const [, flat] = await waitFor('the task entry', async () => ((await redis.sendCommand(['XRANGE', keys.tasks, '-', '+'])) as StreamEntry[])[0], {
        timeoutMs: 10_000,
        intervalMs: 50,
      });
      // A worker of another version, say: a success without its model, usage or attempts.
      const outcome = JSON.stringify({ ok: true, output: { valid: true }, provider: 'native', warnings: [] });
      await redis.sendCommand(['XADD', fieldsOf(flat).reply_to!, '*', 'task_id', 'probe-call', 'outcome', outcome]);
      const result = await call;
      assert.equal(result.ok, false);
      assert.ok(!result.ok && result.error.code === 'malformed', JSON.stringify(result));
      assert.match(result.error.message, /model: .*usage: /);
    } finally {
      await coordinator.close();
      await redis.sendCommand(['DEL', keys.tasks]);
    }
  });
});
