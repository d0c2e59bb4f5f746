import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { EVENT_ORDER } from '../src/agents/types.ts';
import { FakeVendors } from './providers/fake-vendors.ts';
import { QUERY, readSse, startGeneration, until, vendorEnv, type GenerationHarness } from './harness.ts';

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
  const workers: Worker[] = [];

  before(async () => {
    await fake.start();
    gen = await startGeneration({ ...vendorEnv(fake, ['native']), AGENT_POOL: 'redis', AGENT_POOL_NAME: 'agents', AGENT_POOL_TASK_TIMEOUT_MS: '20000' });
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
    await until(async () => workers.every((worker) => said(worker, 'agent pool worker started').length === 1), 20_000);
  });
  after(async () => {
    for (const worker of workers) if (!worker.exited) worker.child.kill('SIGTERM');
    await until(async () => workers.every((worker) => worker.exited), 10_000).catch(() => {});
    await gen.stop();
    await fake.stop();
  });
  beforeEach(() => fake.reset());

  it('runs the whole pipeline as tasks on the workers and streams events in order', async () => {
    const health = await gen.get('/health');
    assert.equal(health.body.agent_pool, 'redis');
    const response = await fetch(`${gen.url}/api/v1/timepoints/generate/stream`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ query: QUERY }) });
    const events = await readSse(response);
    assert.deepEqual(events.filter((event) => event.event === 'agent').map((event) => event.data.agent), EVENT_ORDER);
    assert.equal(events.at(-1)!.event, 'done');
    // Worker logs arrive through pipes, possibly after the result did.
    await until(async () => workers.reduce((sum, worker) => sum + said(worker, 'agent task finished').length, 0) >= 13, 10_000);
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
    await until(async () => {
      const started = said(victim, 'agent task started').length;
      return started > before && started > said(victim, 'agent task finished').length;
    }, 20_000, 5);
    victim.child.kill('SIGKILL');
    const reply = await pending;
    clearInterval(sampler);
    assert.equal(reply.status, 200, JSON.stringify(reply.body));
    assert.equal(reply.body.dialog.length, 3);
    assert.ok(said(survivor, 'agent pool: redelivered task claimed').length >= 1, 'the survivor claimed the dead worker\'s task');
    assert.ok(Math.max(...depths) >= 1, 'queue depth was visible while tasks waited');
    const metrics = await gen.get('/metrics');
    assert.match(metrics.body, /generation_agent_queue_depth\{service="generation"\} \d+/);
    // The series the AgentPool's autoscaler selects by its pool's name (AGENT_POOL_NAME).
    assert.match(metrics.body, /tempora_generation_queue_depth\{[^}]*pool="agents"[^}]*\} \d+/);
  });
});
