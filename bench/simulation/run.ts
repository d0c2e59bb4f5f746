/**
 * Simulation service benchmark: `npm run bench:simulation`
 *
 *   1. Wall time against the critical path: every model call takes a fixed latency (BENCH_CALL_MS,
 *      default 200) at a local OpenAI-compatible server; a fidelity-5 FORWARD run of
 *      constitutional-convention (5 timepoints, 5 acting entities, a scene call each timepoint) has a
 *      critical path of 10 calls one after another (each timepoint: its entity calls in parallel, then its
 *      scene). Wall time from POST to the run's end (through `wait`), BENCH_RUNS times. Target ≤ 1.05×.
 *   2. 50 concurrent runs (BENCH_CONCURRENT) at fidelity 3 with the same provider: runs per second, and
 *      the service process's CPU time per run (user + system, from /proc).
 *
 * Uses DATABASE_URL when set, otherwise starts PostgreSQL like `npm test`.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { startInfra } from '../../scripts/infra.ts';
import { createDatabase, dropDatabase } from '../../test/support/database.ts';
import { request } from '../../test/support/http.ts';
import { launch, serviceListening, shownAt } from '../../test/support/platform.ts';
import { FakeModel } from '../../test/support/stand-ins/chat-model.ts';

const CALL_MS = Number(process.env.BENCH_CALL_MS ?? 200);
const RUNS = Number(process.env.BENCH_RUNS ?? 5);
const CONCURRENT = Number(process.env.BENCH_CONCURRENT ?? 50);
const KEY = 'bench-service-key-0123456789';
const headers = { 'X-Service-Key': KEY, 'X-User-ID': 'bench' };
const step = (message: string) => process.stderr.write(`[bench] ${message}\n`);
const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

const infra = process.env.DATABASE_URL ? undefined : await startInfra();
if (infra) Object.assign(process.env, infra.env);

/** User plus system CPU seconds of a process so far (Linux). */
function cpuSeconds(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

const model = await new FakeModel().start();
model.latencyMs = CALL_MS;
const database = await createDatabase('benchsim');
const { child, announced } = launch(
  fileURLToPath(new URL('../../services/simulation/src/main.ts', import.meta.url)),
  [],
  {
    ...process.env,
    DATABASE_URL: database,
    REDIS_URL: '',
    PORT: '0',
    METRICS_PORT: '0',
    HOST: '127.0.0.1',
    SERVICE_KEY: KEY,
    OPENROUTER_BASE_URL: model.url,
    RUN_CONCURRENCY: String(Math.max(CONCURRENT, 16)),
    RUN_CLAIM_INTERVAL_MS: '1000',
    MAX_WAIT_SECONDS: '300',
    // Its "listening" line (info) says which port it bound; only warnings are printed.
    LOG_LEVEL: 'info',
    OTEL_SDK_DISABLED: 'true',
  },
  serviceListening('simulation'),
  shownAt('warn', (line) => console.log(line)),
);

try {
  const { url: base } = await announced;
  for (let attempt = 0; ; attempt += 1) {
    if ((await request(base, '/health').catch(() => ({ status: 0 }))).status === 200) break;
    if (attempt > 600) throw new Error('the service did not start');
    await new Promise((resolve) => setTimeout(resolve, 100));
  }

  // 1. Fidelity 5: wall time against the critical path.
  const body = { template: 'constitutional-convention', fidelity: 5 };
  const ratios: number[] = [];
  const walls: number[] = [];
  const overheads: number[] = [];
  const db = new pg.Client({ connectionString: database });
  await db.connect();
  let critical = 0;
  for (let run = 0; run <= RUNS; run += 1) {
    const calls = model.requests.length;
    const started = performance.now();
    const reply = await request(base, '/api/v1/simulate?wait=60', { method: 'POST', headers, body });
    const wall = performance.now() - started;
    if (reply.body.status !== 'completed') throw new Error(`run ${run}: ${JSON.stringify(reply.body)}`);
    // Calls one after another: per timepoint, one wave of entity calls and the scene call after it.
    const asked = model.requests.slice(calls);
    const waves = reply.body.progress.steps_total * (asked.some((call) => call.action === 'scene') ? 2 : 1);
    critical = waves * CALL_MS;
    if (run === 0) {
      step(`warm-up: ${asked.length} calls, ${waves} on the critical path, ${wall.toFixed(0)} ms`);
      continue;
    }
    walls.push(wall);
    ratios.push(wall / critical);
    // The same path as the calls took it (their HTTP round trips under this machine's load included):
    // what is left of the wall time is the service's own.
    const measured = await db.query<{ path: string }>(
      `select coalesce(sum(longest), 0) as path from (select step, action, max(duration_ms) as longest from simulation_calls where run_id = $1 group by step, action) waves`,
      [reply.body.id],
    );
    const overhead = wall - Number(measured.rows[0]!.path);
    overheads.push(overhead);
    step(
      `fidelity 5 run ${run}: ${wall.toFixed(0)} ms against a critical path of ${critical} ms (${(wall / critical).toFixed(3)}×); the calls on it took ${measured.rows[0]!.path} ms, the service ${overhead.toFixed(0)} ms`,
    );
  }

  await db.end();

  // 2. 50 concurrent runs at fidelity 3.
  const cpuBefore = cpuSeconds(child.pid!);
  const started = performance.now();
  const replies = await Promise.all(
    Array.from({ length: CONCURRENT }, () =>
      request(base, '/api/v1/simulate?wait=300', { method: 'POST', headers, body: { template: 'constitutional-convention', fidelity: 3 } }),
    ),
  );
  const elapsed = (performance.now() - started) / 1000;
  const cpu = cpuSeconds(child.pid!) - cpuBefore;
  const completed = replies.filter((reply) => reply.body.status === 'completed').length;
  if (completed !== CONCURRENT) throw new Error(`${CONCURRENT - completed} of the concurrent runs did not complete`);
  const calls = replies.reduce((sum, reply) => sum + reply.body.cost.calls, 0);

  console.log(`\nSimulation service, model calls of ${CALL_MS} ms each (local OpenAI-compatible server)`);
  console.log(`| measure | value |`);
  console.log(`|---|---|`);
  console.log(`| fidelity-5 run, critical path | ${critical} ms (${critical / CALL_MS} calls in sequence) |`);
  console.log(`| fidelity-5 run, wall time (median of ${RUNS}) | ${median(walls).toFixed(0)} ms |`);
  console.log(`| wall / critical path (median, worst) | ${median(ratios).toFixed(3)}×, ${Math.max(...ratios).toFixed(3)}× |`);
  console.log(`| wall less the critical path's calls as they took it (median) | ${median(overheads).toFixed(0)} ms |`);
  console.log(`| ${CONCURRENT} concurrent fidelity-3 runs | ${elapsed.toFixed(2)} s, ${(CONCURRENT / elapsed).toFixed(1)} runs/s, ${calls} model calls |`);
  console.log(`| service CPU per run | ${((cpu / CONCURRENT) * 1000).toFixed(1)} ms (${cpu.toFixed(2)} s for ${CONCURRENT}) |`);
} finally {
  child.kill('SIGTERM');
  await new Promise((resolve) => child.once('exit', resolve));
  await model.stop();
  await dropDatabase(database);
  await infra?.stop();
}
