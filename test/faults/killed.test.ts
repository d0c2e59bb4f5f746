import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { freePort } from '../../scripts/infra.ts';
import { FakeVendors } from '../../services/generation/test/providers/fake-vendors.ts';
import { vendorEnv } from '../../services/generation/test/harness.ts';
import { createDatabase, dropDatabase } from '../support/database.ts';
import { call, json } from './support.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));

/** A service or worker as its own process (as a pod runs it), its output kept; killed with SIGKILL by the test. */
class Proc {
  readonly child: ChildProcess;
  output = '';
  constructor(script: string, env: NodeJS.ProcessEnv) {
    this.child = spawn(process.execPath, [script], { cwd: root, env: { ...process.env, LOG_LEVEL: 'info', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    this.child.stdout!.on('data', (chunk) => (this.output += chunk));
    this.child.stderr!.on('data', (chunk) => (this.output += chunk));
  }

  async said(pattern: RegExp, timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!pattern.test(this.output)) {
      if (Date.now() > deadline || this.child.exitCode !== null) throw new Error(`no ${pattern} within ${timeoutMs} ms:\n${this.output.slice(-3000)}`);
      await sleep(50);
    }
  }

  async kill(signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    const exited = new Promise((resolve) => this.child.once('exit', resolve));
    this.child.kill(signal);
    await exited;
  }
}

/**
 * Processes killed with SIGKILL while they hold work: nothing they held is lost or done twice. Each
 * service runs as its own process on the test PostgreSQL (a fresh database) and Redis (its own prefix).
 */
describe('faults: a process killed (SIGKILL) while it holds work', function () {
  this.timeout(120_000);
  const procs: Proc[] = [];
  const start = (script: string, env: NodeJS.ProcessEnv) => {
    const proc = new Proc(script, env);
    procs.push(proc);
    return proc;
  };
  afterEach(async () => {
    for (const proc of procs.splice(0)) await proc.kill('SIGTERM');
  });

  describe('an agent pool worker in the middle of a task', () => {
    const fake = new FakeVendors();
    let database: string;
    before(async () => {
      await fake.start();
      database = await createDatabase('faults_pool');
    });
    after(async () => {
      await fake.stop();
      await dropDatabase(database);
    });

    it('is redelivered to another worker once its heartbeat lapses; the generation completes, each agent answered once', async () => {
      // Every vendor call takes a while until the kill, so that the worker is killed with a task in hand.
      fake.latencyMs = 1_500;
      const port = await freePort();
      const env: NodeJS.ProcessEnv = {
        ...vendorEnv(fake, ['aggregator']),
        DATABASE_URL: database,
        REDIS_URL: process.env.REDIS_URL,
        REDIS_KEY_PREFIX: `faults-${randomBytes(4).toString('hex')}`,
        SERVICE_KEY: 'faults-service-key',
        AGENT_POOL: 'redis',
        AGENT_POOL_CLAIM_IDLE_MS: '2000',
        GRAPH_LOOKUP: 'false',
        FREE_IMAGE_ENABLED: 'false',
        PROVIDER_TIMEOUT_MS: '10000',
      };
      const service = start('services/generation/src/main.ts', { ...env, PORT: String(port) });
      const first = start('services/generation/src/worker.ts', env);
      await service.said(/generation service listening/, 60_000);
      await first.said(/agent pool worker started/, 60_000);

      const url = `http://127.0.0.1:${port}`;
      const generation = call('generate', `${url}/api/v1/timepoints/generate/sync`, json({ 'X-Service-Key': 'faults-service-key', 'X-User-ID': 'faults-user' }, { query: 'The signing of Magna Carta, 1215', preset: 'hyper' }), 100_000);
      await first.said(/agent task started/, 30_000);
      await first.kill();
      const killedAt = Date.now();
      fake.latencyMs = 0;
      const second = start('services/generation/src/worker.ts', env);
      const answer = await generation;
      assert.equal(answer.status, 200, JSON.stringify(answer.body).slice(0, 500));
      assert.match(second.output, /redelivered task claimed/, 'the killed worker\'s task went to the other');
      // Each task was finished once: the one in hand when killed by the second worker alone.
      const finished = [...second.output.matchAll(/"task":"([^"]+)"[^\n]*agent task finished/g)].map((match) => match[1]);
      assert.equal(new Set(finished).size, finished.length, 'no task finished twice');
      process.stderr.write(`      [faults] pool worker killed: the generation completed ${Date.now() - killedAt} ms later, ${finished.length} tasks on the second worker\n`);
    });
  });
});
