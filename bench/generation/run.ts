/**
 * Generation pipeline benchmark: `npm run bench:generation`
 *
 *   1. Dependency graph vs critical path: every agent call takes a fixed latency (BENCH_AGENT_MS,
 *      default 200) at a local native-provider server; the wall time of a scene is compared with the
 *      critical path (8 sequential calls: Judge, Timeline, Scene, Characters, CharacterBio, Graph, Dialog,
 *      Critique; the image branch is 8 too). Target ≤ 1.05×. Beside it, the same pipeline run as a list
 *      (14 + n bios calls one after another) for comparison.
 *   2. Per-request overhead: the offline provider (no latency), sync requests one at a time.
 *   3. 100 concurrent streams (BENCH_STREAMS) on one process with the fixed-latency provider: for every
 *      event, how long after it was ready (its agent finished and every agent before it in the spec's
 *      order had been reported) it reached the client. Target: none later than 50 ms.
 *
 * Uses DATABASE_URL / REDIS_URL when set, otherwise starts PostgreSQL like `npm test`.
 */

import { randomBytes } from 'node:crypto';
import { loadavg } from 'node:os';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { startInfra } from '../../scripts/infra.ts';
import { EVENT_ORDER } from '../../services/generation/src/agents/types.ts';
import { readSse } from '../../services/generation/test/harness.ts';
import { createDatabase, dropDatabase } from '../../test/support/database.ts';
import { launch, serviceListening, shownAt } from '../../test/support/platform.ts';
import { FakeVendors } from '../../test/support/stand-ins/model-vendors.ts';

const AGENT_MS = Number(process.env.BENCH_AGENT_MS ?? 200);
const STREAMS = Number(process.env.BENCH_STREAMS ?? 100);
const RUNS = Number(process.env.BENCH_RUNS ?? 5);
const OVERHEAD_REQUESTS = Number(process.env.BENCH_OVERHEAD_REQUESTS ?? 200);
const QUERY = 'Apollo 11 lands on the Moon, July 20 1969';
const step = (message: string) => process.stderr.write(`[bench] ${message}\n`);
const percentile = (values: number[], p: number) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? Number.NaN;
};
const median = (values: number[]) => percentile(values, 50);

const infra = process.env.DATABASE_URL ? undefined : await startInfra();
if (infra) Object.assign(process.env, infra.env);

/** The service under test in its own process (so the vendor server and the clients do not share its event loop). */
async function service(env: Record<string, string>) {
  const database = await createDatabase('benchgen');
  const { child, announced } = launch(
    fileURLToPath(new URL('../../services/generation/src/main.ts', import.meta.url)),
    [],
    {
      ...process.env,
      DATABASE_URL: database,
      REDIS_URL: '',
      PORT: '0',
      METRICS_PORT: '0',
      HOST: '127.0.0.1',
      REDIS_KEY_PREFIX: `bench-${randomBytes(3).toString('hex')}`,
      // Its "listening" line (info) says which port it bound; only warnings are printed.
      LOG_LEVEL: 'info',
      OTEL_SDK_DISABLED: 'true',
      GRAPH_LOOKUP: 'false',
      FREE_IMAGE_ENABLED: 'false',
      STREAM_HEARTBEAT_MS: '15000',
      ...env,
    },
    serviceListening('generation'),
    shownAt('warn', (line) => console.log(line)),
  );
  const { url } = await announced;
  for (let attempt = 0; ; attempt += 1) {
    const ok = await fetch(`${url}/health`).then(
      (response) => response.ok,
      () => false,
    );
    if (ok) break;
    if (attempt > 600) throw new Error('the generation service did not start');
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return {
    url,
    async stop() {
      child.kill('SIGTERM');
      await new Promise((resolve) => child.once('exit', resolve));
      await dropDatabase(database);
    },
  };
}

const post = (url: string, path: string, body: unknown) =>
  fetch(`${url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });

const fake = await new FakeVendors().start();
const lines: string[] = [];
try {
  // 1. Critical path.
  fake.latencyMs = AGENT_MS;
  const native = await service({ GEMINI_API_KEY: 'bench', GEMINI_BASE_URL: fake.url, STABILITY_API_KEY: 'bench', STABILITY_BASE_URL: fake.url });
  const critical = 8 * AGENT_MS;
  const walls: number[] = [];
  const imageWalls: number[] = [];
  const callsPer = { text: 0, image: 0 };
  for (let run = 0; run < RUNS; run += 1) {
    for (const [generate_image, into] of [
      [false, walls],
      [true, imageWalls],
    ] as const) {
      fake.requests.length = 0;
      const started = performance.now();
      const response = await post(native.url, '/api/v1/timepoints/generate/sync', { query: QUERY, generate_image });
      await response.json();
      if (response.status !== 200) throw new Error(`sync answered ${response.status}`);
      into.push(performance.now() - started);
      callsPer[generate_image ? 'image' : 'text'] = fake.requests.length;
    }
  }
  step(`critical path: ${critical} ms; wall ${median(walls).toFixed(0)} ms (text), ${median(imageWalls).toFixed(0)} ms (with image)`);
  lines.push('## Dependency graph against the critical path', '');
  lines.push(
    `Every agent call takes ${AGENT_MS} ms at a local native-provider server (recorded replies, 2 characters, so 2 bios). Median of ${RUNS} sync requests.`,
    '',
  );
  lines.push('| request | agent calls | critical path | wall time | ratio | as a list (sum of calls) |', '|---|---|---|---|---|---|');
  lines.push(
    `| text only | ${callsPer.text} | ${critical} ms | ${median(walls).toFixed(0)} ms | ${(median(walls) / critical).toFixed(3)}× | ${callsPer.text * AGENT_MS} ms |`,
  );
  lines.push(
    `| with image | ${callsPer.image} | ${critical} ms | ${median(imageWalls).toFixed(0)} ms | ${(median(imageWalls) / critical).toFixed(3)}× | ${callsPer.image * AGENT_MS} ms |`,
  );
  lines.push('');

  // 3. Concurrent streams (same fixed latency).
  fake.reset();
  fake.latencyMs = AGENT_MS;
  const lateness: number[] = [];
  const ownDelay: number[] = [];
  let events = 0;
  const clientLoop = monitorEventLoopDelay({ resolution: 10 });
  clientLoop.enable();
  const startedStreams = performance.now();
  await Promise.all(
    Array.from({ length: STREAMS }, async (_, index) => {
      const response = await post(native.url, '/api/v1/timepoints/generate/stream', { query: `${QUERY} #${index}`, generate_image: index % 2 === 0 });
      const received = await readSse(response);
      const agentEvents = received.filter((event) => event.event === 'agent');
      if (agentEvents.map((event) => event.data.agent).join() !== EVENT_ORDER.join()) throw new Error(`stream ${index} out of order or incomplete`);
      let readyAt = 0;
      for (const event of agentEvents) {
        readyAt = Math.max(readyAt, event.data.completed_at);
        lateness.push(event.at - readyAt);
        ownDelay.push(event.at - event.data.completed_at);
        events += 1;
      }
    }),
  );
  const streamWall = performance.now() - startedStreams;
  clientLoop.disable();
  step(`${STREAMS} streams: ${events} events; max lateness ${Math.max(...lateness)} ms`);
  lines.push(`## ${STREAMS} concurrent streams on one process`, '');
  lines.push(
    `${STREAMS} streams at once (half with images), ${AGENT_MS} ms per agent call; ${events} agent events; all ${STREAMS} completed in ${streamWall.toFixed(0)} ms, every stream in the spec's order.`,
    '',
  );
  lines.push('| measure | p50 | p99 | max |', '|---|---|---|---|');
  lines.push(
    `| event lateness after it was ready (agent finished and all earlier agents reported) | ${percentile(lateness, 50)} ms | ${percentile(lateness, 99)} ms | ${Math.max(...lateness)} ms |`,
  );
  lines.push(
    `| event delay after its own agent finished (includes waiting for earlier agents in the order) | ${percentile(ownDelay, 50)} ms | ${percentile(ownDelay, 99)} ms | ${Math.max(...ownDelay)} ms |`,
  );
  lines.push(
    '',
    `Event-loop delay of the measuring process (clients and vendor server) meanwhile: p99 ${(clientLoop.percentile(99) / 1e6).toFixed(0)} ms, max ${(clientLoop.max / 1e6).toFixed(0)} ms; load average at the end ${loadavg()
      .map((value) => value.toFixed(1))
      .join(' ')}.`,
    '',
  );
  await native.stop();

  // 2. Overhead with the offline provider.
  const offline = await service({});
  for (let i = 0; i < 10; i += 1) await (await post(offline.url, '/api/v1/timepoints/generate/sync', { query: QUERY })).json();
  const overhead: number[] = [];
  for (let i = 0; i < OVERHEAD_REQUESTS; i += 1) {
    const started = performance.now();
    const response = await post(offline.url, '/api/v1/timepoints/generate/sync', { query: `${QUERY} ${i}` });
    await response.json();
    overhead.push(performance.now() - started);
  }
  await offline.stop();
  step(`overhead p50 ${median(overhead).toFixed(1)} ms`);
  lines.push('## Per-request overhead', '');
  lines.push(
    `Offline provider (no model latency), ${OVERHEAD_REQUESTS} sequential sync requests: everything the service adds around the model calls (validation, 16 agent tasks with JSON validation, scene assembly, the PostgreSQL insert, HTTP).`,
    '',
  );
  lines.push('| p50 | p90 | p99 |', '|---|---|---|');
  lines.push(`| ${percentile(overhead, 50).toFixed(1)} ms | ${percentile(overhead, 90).toFixed(1)} ms | ${percentile(overhead, 99).toFixed(1)} ms |`, '');
} finally {
  await fake.stop();
  await infra?.stop();
}
console.log(lines.join('\n'));
