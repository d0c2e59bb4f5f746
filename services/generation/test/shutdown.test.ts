import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import { type AddressInfo, connect } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { type Knex, openDatabase } from '@tempora/kit/data';
import { createLogger } from '@tempora/kit/observability';
import { loadConfig } from '@tempora/kit/runtime';
import { createDatabase, dropDatabase } from '../../../test/support/database.ts';
import { launch, serviceListening } from '../../../test/support/platform.ts';
import { FakeVendors } from '../../../test/support/stand-ins/model-vendors.ts';
import { waitFor } from '../../../test/support/wait.ts';
import { CALLBACK_MARGIN_MS, GenerationServiceConfigSchema } from '../src/config.ts';
import { migrations } from '../src/migrations.ts';
import { GenerationRepository, type JobRow } from '../src/repository/index.ts';
import { type GenerationHarness, QUERY, SERVICE_KEY, startGeneration, user, userId, vendorEnv } from './harness.ts';

const MAIN = fileURLToPath(new URL('../src/main.ts', import.meta.url));
const SECRET = 'callback-secret-0123456789';

/** A callback receiver counting deliveries per job; `failing` answers 503 to every delivery while true. */
class Receiver {
  private server: Server | undefined;
  url = '';
  readonly deliveries: Array<{ job: string; attempt: string; body: any }> = [];
  failing = false;

  async start(): Promise<void> {
    this.server = createServer((request, response) => {
      const chunks: Buffer[] = [];
      request.on('data', (chunk: Buffer) => chunks.push(chunk));
      request.on('end', () => {
        if (this.failing) return void response.writeHead(503).end();
        this.deliveries.push({
          job: request.headers['x-tempora-job-id'] as string,
          attempt: request.headers['x-tempora-attempt'] as string,
          body: JSON.parse(Buffer.concat(chunks).toString()),
        });
        response.writeHead(204).end();
      });
    });
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server!.address() as AddressInfo).port}/hooks`;
  }

  of(job: string) {
    return this.deliveries.filter((delivery) => delivery.job === job);
  }

  stop(): void {
    this.server?.close();
  }
}

interface RawAnswer {
  status: number;
  headers: Record<string, string>;
  body: any;
}

/**
 * A request whose last byte is held back, on a connection opened now: the server counts it in flight, so
 * the connection outlives the start of a shutdown (which closes the listener and idle connections) and the
 * request reaches the app once `finish` sends that byte.
 */
async function heldRequest(url: string, method: string, path: string, body?: unknown): Promise<{ finish(): Promise<RawAnswer> }> {
  const { hostname, port } = new URL(url);
  const socket = connect(Number(port), hostname);
  await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
  const payload = body === undefined ? '' : JSON.stringify(body);
  const head = [
    `${method} ${path} HTTP/1.1`,
    `Host: ${hostname}:${port}`,
    'Connection: close',
    `X-Service-Key: ${SERVICE_KEY}`,
    `X-User-ID: ${userId('drained')}`,
    ...(body === undefined ? [] : ['Content-Type: application/json', `Content-Length: ${Buffer.byteLength(payload)}`]),
  ].join('\r\n');
  const whole = `${head}\r\n\r\n${payload}`;
  socket.write(whole.slice(0, -1));
  const received: Buffer[] = [];
  socket.on('data', (chunk: Buffer) => received.push(chunk));
  const ended = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  return {
    async finish() {
      socket.write(whole.slice(-1));
      await ended;
      const text = Buffer.concat(received).toString();
      const [top = '', rest = ''] = text.split('\r\n\r\n');
      const [statusLine, ...lines] = top.split('\r\n');
      const headers = Object.fromEntries(lines.map((line) => [line.slice(0, line.indexOf(':')).toLowerCase(), line.slice(line.indexOf(':') + 1).trim()]));
      const chunked = headers['transfer-encoding'] === 'chunked';
      const raw = chunked ? rest.replace(/^[0-9a-f]+\r\n/, '').replace(/\r\n0\r\n\r\n$/, '') : rest;
      return { status: Number(statusLine?.split(' ')[1]), headers, body: raw ? JSON.parse(raw) : null };
    },
  };
}

/** The generation service as `npm start` runs it: its own process, listening on a port of its own. */
async function startProcess(env: Record<string, string>): Promise<{ child: ChildProcess; url: string }> {
  const { child, announced } = launch(
    MAIN,
    [],
    { ...process.env, PORT: '0', METRICS_PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info', OTEL_SDK_DISABLED: 'true', ...env },
    serviceListening('generation'),
  );
  return { child, url: (await announced).url };
}

/** The database as a replica sees it, outliving the instances under test. */
async function openRepository(url: string): Promise<{ repository: GenerationRepository; knex: Knex; close(): Promise<void> }> {
  const database = await openDatabase({ service: 'generation', url, dataDir: '', migrations, logger: createLogger('generation-test', 'silent') });
  return { repository: new GenerationRepository(database.knex), knex: database.knex, close: () => database.close() };
}

const jobRow = (gen: GenerationHarness, id: string): Promise<JobRow> => gen.instance.knex('generation_jobs').where({ id }).first();

describe('generation: rollouts keep async work in flight', function () {
  this.timeout(90_000);
  const fake = new FakeVendors();
  const receiver = new Receiver();
  let env: Record<string, string>;

  before(async () => {
    await fake.start();
    await receiver.start();
    env = { ...vendorEnv(fake, ['native']), CALLBACK_SECRET: SECRET, CALLBACK_ALLOWLIST: '127.0.0.1', JOB_LEASE_MS: '1500' };
  });
  after(async () => {
    receiver.stop();
    await fake.stop();
  });
  beforeEach(() => {
    fake.reset();
    receiver.deliveries.length = 0;
    receiver.failing = false;
  });

  it('finishes the jobs it runs when asked to stop, each once with one callback, and refuses new work meanwhile (503, Retry-After)', async () => {
    const database = await createDatabase('generation');
    const gen = await startGeneration(env, database);
    const { repository, knex, close } = await openRepository(database);
    try {
      // Eight text agents one after another, 300 ms each: a job takes seconds.
      fake.latencyMs = 300;
      const submitted = await Promise.all(
        Array.from({ length: 5 }, (_, i) =>
          gen.post('/api/v1/timepoints/generate', { query: QUERY, callback_url: receiver.url, request_context: { i } }, user('rollout')),
        ),
      );
      assert.deepEqual(
        submitted.map((reply) => reply.status),
        [202, 202, 202, 202, 202],
      );
      const ids = submitted.map((reply) => reply.body.job_id as string);
      await waitFor('every job running', async () => (await Promise.all(ids.map((id) => jobRow(gen, id)))).every((job) => job.status === 'running'));
      const held = await Promise.all([
        heldRequest(gen.url, 'POST', '/api/v1/timepoints/generate/sync', { query: QUERY }),
        heldRequest(gen.url, 'POST', '/api/v1/timepoints/generate/stream', { query: QUERY }),
        heldRequest(gen.url, 'POST', '/api/v1/timepoints/generate', { query: QUERY }),
        heldRequest(gen.url, 'GET', '/health'),
      ]);
      // Until the server has read the first bytes, a connection counts as idle, and a shutdown closes idle ones.
      await sleep(200);

      // What SIGTERM runs (the kit's closeOnSignals calls the server's close).
      const started = Date.now();
      const closing = gen.stop();
      const [sync, stream, async, health] = (await Promise.all(held.map((request) => request.finish()))) as [RawAnswer, RawAnswer, RawAnswer, RawAnswer];
      for (const answer of [sync, stream, async]) {
        assert.equal(answer.status, 503);
        assert.equal(answer.headers['content-type'], 'application/problem+json');
        assert.equal(answer.headers['retry-after'], '1');
        assert.equal(answer.body.type, 'https://tempora.dev/problems/draining');
      }
      assert.equal(health.status, 503);
      assert.equal(health.body.status, 'draining');
      await assert.rejects(fetch(`${gen.url}/health`), 'the listener is closed');
      const stillRunning = (await Promise.all(ids.map((id) => repository.jobs.get(id)))).filter((job) => job!.status === 'running');
      assert.ok(stillRunning.length > 0, 'the jobs were still running when the shutdown began');

      await closing;
      assert.ok(Date.now() - started > 500, 'the shutdown waited for the jobs');
      for (const id of ids) {
        const job = (await repository.jobs.get(id))!;
        assert.equal(job.status, 'completed', id);
        assert.equal(job.attempts, 1);
        assert.equal(job.callback_status, 'delivered');
        assert.equal(receiver.of(id).length, 1, `one callback for ${id}`);
        assert.equal(receiver.of(id)[0]!.body.status, 'completed');
      }
      assert.deepEqual(await knex('generation_jobs').whereIn('status', ['queued', 'running']).select('id'), []);
      assert.equal(Number((await knex('timepoints').count<Array<{ count: string }>>('* as count'))[0]!.count), 5, 'one scene a job');
      assert.equal(Number((await knex('generation_jobs').count<Array<{ count: string }>>('* as count'))[0]!.count), 5, 'no job from the drained requests');
    } finally {
      await close();
      await dropDatabase(database);
    }
  });

  it('takes over, once, the job of a replica killed mid-run: of two replicas sweeping, one re-runs it to completion', async () => {
    const database = await createDatabase('generation');
    const { repository, knex, close } = await openRepository(database);
    const replicas: GenerationHarness[] = [];
    let victim: ChildProcess | undefined;
    try {
      fake.latencyMs = 300;
      const started = await startProcess({ ...env, DATABASE_URL: database, SERVICE_KEY, GRAPH_LOOKUP: 'false' });
      victim = started.child;
      const submitted = await fetch(`${started.url}/api/v1/timepoints/generate`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...user('killed') },
        body: JSON.stringify({ query: QUERY, callback_url: receiver.url }),
      });
      assert.equal(submitted.status, 202);
      const id = ((await submitted.json()) as { job_id: string }).job_id;
      await waitFor('two calls at the native vendor', async () => fake.of('native').length >= 2);
      victim.kill('SIGKILL');
      const orphan = (await repository.jobs.get(id))!;
      assert.equal(orphan.status, 'running');
      assert.equal(orphan.attempts, 1);

      replicas.push(await startGeneration(env, database), await startGeneration(env, database));
      const job = await waitFor(
        'the orphaned job completed and its callback delivered',
        async () => {
          const row = await repository.jobs.get(id);
          return row?.status === 'completed' && row.callback_status === 'delivered' && row;
        },
        { timeoutMs: 20_000 },
      );
      assert.equal(job.attempts, 2, 'run once more, not twice more');
      assert.ok(
        replicas.some((replica) => replica.instance.generator.instance === job.owner_instance),
        'taken over by one of the replicas',
      );
      assert.equal(receiver.of(id).length, 1, 'one callback');
      assert.equal(receiver.of(id)[0]!.body.status, 'completed');
      assert.equal(
        Number(
          (
            await knex('timepoints')
              .where({ owner: userId('killed') })
              .count<Array<{ count: string }>>('* as count')
          )[0]!.count,
        ),
        1,
      );
      // "Not again" has no event to wait on: a window of several lease checks is the test.
      await sleep(2_000);
      assert.equal((await repository.jobs.get(id))!.attempts, 2, 'no replica took it over again');
    } finally {
      victim?.kill('SIGKILL');
      for (const replica of replicas) await replica.stop();
      await close();
      await dropDatabase(database);
    }
  });

  it('fails a job lost twice (503, callback sent) and re-runs one the previous release left without a lease', async () => {
    const database = await createDatabase('generation');
    const { repository, knex, close } = await openRepository(database);
    let gen: GenerationHarness | undefined;
    try {
      const holder = { instance: 'gone', token: randomUUID(), leaseMs: 1 };
      const twice = (await repository.jobs.insert({ id: randomUUID(), owner: null, request: { query: QUERY } as never, callback_url: receiver.url }, holder))
        .job;
      await knex('generation_jobs').where({ id: twice.id }).update({ status: 'running', attempts: 2 });
      // As the previous release wrote it: no lease, and untouched for longer than a generation and its callback could take.
      const legacy = (await repository.jobs.insert({ id: randomUUID(), owner: null, request: { query: QUERY } as never, callback_url: null }, holder)).job;
      await knex('generation_jobs')
        .where({ id: legacy.id })
        .update({ status: 'running', owner_instance: null, lease_token: null, lease_until: null, updated_at: new Date(Date.now() - 400_000) });

      gen = await startGeneration(env, database);
      const failed = await waitFor('the callback delivered', async () => {
        const row = await repository.jobs.get(twice.id);
        return row?.callback_status === 'delivered' && row;
      });
      assert.equal(failed.status, 'failed');
      assert.equal(failed.error!.status, 503);
      assert.match(failed.error!.detail, /lost this job twice/);
      assert.equal(receiver.of(twice.id).length, 1);
      assert.equal(receiver.of(twice.id)[0]!.body.status, 'failed');
      assert.equal(receiver.of(twice.id)[0]!.body.error.status, 503);
      const rerun = await waitFor('the legacy job completed', async () => {
        const row = await repository.jobs.get(legacy.id);
        return row?.status === 'completed' && row;
      });
      assert.equal(rerun.attempts, 2);
      assert.ok(rerun.timepoint_id);
    } finally {
      await gen?.stop();
      await close();
      await dropDatabase(database);
    }
  });

  it('hands a job still under way at the end of the grace to another replica, which finishes it once', async () => {
    const database = await createDatabase('generation');
    const { repository, close } = await openRepository(database);
    // The grace covers the pipeline (2 s) but not a receiver that is down for longer.
    const short = { ...env, GENERATION_TIMEOUT_MS: '2000', SHUTDOWN_GRACE_MS: '2500', CALLBACK_MAX_ATTEMPTS: '20', CALLBACK_BACKOFF_MS: '200' };
    const first = await startGeneration(short, database);
    let second: GenerationHarness | undefined;
    try {
      receiver.failing = true;
      const reply = await first.post('/api/v1/timepoints/generate', { query: QUERY, callback_url: receiver.url });
      const id = reply.body.job_id as string;
      await waitFor('the job completed', async () => (await repository.jobs.get(id))?.status === 'completed');
      await first.stop();
      const handed = (await repository.jobs.get(id))!;
      assert.equal(handed.callback_status, 'pending');
      assert.equal(handed.lease_token, null, 'the stopped replica can write nothing more on it');
      receiver.failing = false;
      second = await startGeneration(short, database);
      const done = await waitFor('the handed-over callback delivered', async () => {
        const row = await repository.jobs.get(id);
        return row?.callback_status === 'delivered' && row;
      });
      assert.equal(done.owner_instance, second.instance.generator.instance);
      assert.equal(done.attempts, 1, 'its pipeline was not run again');
      assert.equal(receiver.of(id).length, 1);
      assert.equal(receiver.of(id)[0]!.body.timepoint.id, done.timepoint_id);
    } finally {
      await second?.stop();
      await close();
      await dropDatabase(database);
    }
  });

  it('gives each lapsed job to exactly one of two replicas sweeping at once', async () => {
    const database = await createDatabase('generation');
    const a = await openRepository(database);
    const b = await openRepository(database);
    try {
      const holder = { instance: 'gone', token: randomUUID(), leaseMs: 1 };
      const ids = [];
      for (let i = 0; i < 30; i += 1)
        ids.push((await a.repository.jobs.insert({ id: randomUUID(), owner: null, request: { query: QUERY } as never, callback_url: null }, holder)).job.id);
      await sleep(10);
      const sweep = async (repository: GenerationRepository, instance: string) => {
        const claimed: string[] = [];
        for (;;) {
          const rows = await repository.jobs.claimExpired(
            { instance, token: randomUUID(), leaseMs: 60_000 },
            { legacyMs: 60_000, maxRuns: 2, limit: 3, interrupted: { status: 503, detail: 'lost' } },
          );
          claimed.push(...rows.map((row) => row.id));
          if (rows.length === 0) return claimed;
        }
      };
      const [mine, theirs] = await Promise.all([sweep(a.repository, 'a'), sweep(b.repository, 'b')]);
      assert.equal(mine.length + theirs.length, 30);
      assert.deepEqual([...new Set([...mine, ...theirs])].sort(), [...ids].sort());
      const rows = await a.knex('generation_jobs').select('status', 'attempts');
      assert.ok(rows.every((row) => row.status === 'running' && row.attempts === 2));
    } finally {
      await a.close();
      await b.close();
      await dropDatabase(database);
    }
  });
});

describe('generation: the shutdown grace', () => {
  it('defaults to GENERATION_TIMEOUT_MS and a margin for the callback, and refuses a grace shorter than a generation', async () => {
    assert.equal(loadConfig(GenerationServiceConfigSchema, {}).SHUTDOWN_GRACE_MS, 300_000 + CALLBACK_MARGIN_MS);
    assert.equal(loadConfig(GenerationServiceConfigSchema, { GENERATION_TIMEOUT_MS: '20000' }).SHUTDOWN_GRACE_MS, 20_000 + CALLBACK_MARGIN_MS);
    assert.equal(loadConfig(GenerationServiceConfigSchema, { GENERATION_TIMEOUT_MS: '20000', SHUTDOWN_GRACE_MS: '20000' }).SHUTDOWN_GRACE_MS, 20_000);
    assert.throws(
      () => loadConfig(GenerationServiceConfigSchema, { SHUTDOWN_GRACE_MS: '10000' }),
      /SHUTDOWN_GRACE_MS: 10000 ms is shorter than GENERATION_TIMEOUT_MS/,
    );
    assert.throws(() => loadConfig(GenerationServiceConfigSchema, { SHUTDOWN_GRACE_MS: 'soon' }), /SHUTDOWN_GRACE_MS/);
    assert.throws(() => loadConfig(GenerationServiceConfigSchema, { JOB_LEASE_MS: '10' }), /JOB_LEASE_MS/);
  });

  it('stops a process started with such a grace, naming the variable', async function () {
    this.timeout(30_000);
    const child = spawn(process.execPath, [MAIN], {
      env: { ...process.env, SHUTDOWN_GRACE_MS: '10000', OTEL_SDK_DISABLED: 'true' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr!.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    const code = await new Promise((resolve) => child.once('exit', resolve));
    assert.equal(code, 1);
    assert.match(stderr, /SHUTDOWN_GRACE_MS: 10000 ms is shorter than GENERATION_TIMEOUT_MS \(300000 ms\)/);
  });
});
