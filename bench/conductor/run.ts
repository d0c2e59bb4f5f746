/**
 * Conductor benchmark: `npm run bench:conductor`
 *
 * The conductor runs as its own process on PostgreSQL; every peer (gateway ledger, the graph's MCP server,
 * generation, simulation) is a stand-in answering after a fixed latency (BENCH_PEER_MS, default 25), so
 * the wall time of a message is the critical path of its peer calls plus what the conductor itself does.
 *
 *   1. The README's request through the offline planner: 3 graph searches in one turn, then a path, a scene
 *      and a simulation in one turn (each paid call charged before it starts, the charges in the turn's
 *      order), then one look at the simulation. Critical path 5 latencies (1; charge, charge, simulation;
 *      1); run one after another, the same 9 peer requests take 9. Overhead = wall − critical path. (The
 *      MCP handshake with the graph is made once per process, in the warm-up.)
 *   2. The same with no latency at all: the conductor's whole cost per message (planning, accounting,
 *      storage, serialization, loopback HTTP to its peers).
 *   3. A scripted model (OpenAI-compatible, answering at once) asking for eight independent calls in one
 *      turn (4 searches, a path, a traversal, two scenes): critical path 3 latencies (charge, charge,
 *      second scene), 10 peer requests in sequence.
 *
 * BENCH_MESSAGES (default 40) messages per row, one at a time, after 5 to warm up.
 * Uses DATABASE_URL when set, otherwise starts PostgreSQL like `npm test`.
 */

import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { startInfra } from '../../scripts/infra.ts';
import { createDatabase, dropDatabase } from '../../test/support/database.ts';
import { announced, serviceListening, shownAt } from '../../test/support/platform.ts';
import { type StandIns, startStandIns } from './stand-ins.ts';

const PEER_MS = Number(process.env.BENCH_PEER_MS ?? 25);
const MESSAGES = Number(process.env.BENCH_MESSAGES ?? 40);
const WARMUP = 5;
const README_REQUEST =
  'Show me what led from the Bastille to Waterloo, then render the coronation of 1804 and simulate what would have happened had the Continental System failed in 1807';
const step = (message: string) => process.stderr.write(`[bench] ${message}\n`);
const percentile = (values: number[], p: number) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? Number.NaN;
};
const ms = (value: number) => `${value.toFixed(1)} ms`;

const infra = process.env.DATABASE_URL ? undefined : await startInfra();
if (infra) Object.assign(process.env, infra.env);

async function conductor(standIns: StandIns, env: Record<string, string>) {
  const database = await createDatabase('benchconductor');
  const child = spawn(
    process.execPath,
    [
      ...(process.env.BENCH_CPU_PROF ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_CPU_PROF}`] : []),
      fileURLToPath(new URL('../../services/conductor/src/main.ts', import.meta.url)),
    ],
    {
      env: {
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
        SERVICE_KEY: 'bench-service-key',
        GATEWAY_URL: standIns.gateway,
        GRAPH_URL: standIns.graph,
        GENERATION_URL: standIns.generation,
        SIMULATION_URL: standIns.simulation,
        CONDUCTOR_RATE_LIMIT_PRO: '100000',
        GEMINI_API_KEY: '',
        OPENROUTER_API_KEY: '',
        OPENROUTER_BASE_URL: '',
        ...env,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  const { url } = await announced(
    child,
    serviceListening('conductor'),
    shownAt('warn', (line) => console.log(line)),
  );
  for (let attempt = 0; ; attempt += 1) {
    if (
      await fetch(`${url}/health`).then(
        (response) => response.ok,
        () => false,
      )
    )
      break;
    if (attempt > 600) throw new Error('the conductor did not start');
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return {
    url,
    /** CPU time the conductor's process has used, in ms (user and system, from /proc). */
    cpuMs() {
      const fields = readFileSync(`/proc/${child.pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
      return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100;
    },
    async stop() {
      child.kill('SIGTERM');
      await new Promise((resolve) => child.once('exit', resolve));
      await dropDatabase(database);
    },
  };
}

/** Sends the messages one at a time (after the warm-up): their wall times, and the conductor's CPU time per message. */
async function measure(
  target: { url: string; cpuMs(): number },
  token: string,
  content: string,
  expectCalls: number,
): Promise<{ walls: number[]; cpu: number }> {
  const { url } = target;
  const walls: number[] = [];
  const send = async () => {
    const started = performance.now();
    const response = await fetch(`${url}/api/v1/conductor/messages`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ content }),
    });
    const body = (await response.json()) as { status: string; tools_called?: Array<{ status: string }>; detail?: string };
    const wall = performance.now() - started;
    if (response.status !== 200 || body.status !== 'completed')
      throw new Error(`the conductor answered ${response.status}: ${JSON.stringify(body).slice(0, 300)}`);
    const ok = body.tools_called!.filter((call) => call.status === 'ok').length;
    if (ok !== expectCalls) throw new Error(`expected ${expectCalls} successful calls, got ${ok}: ${JSON.stringify(body.tools_called).slice(0, 400)}`);
    return wall;
  };
  for (let index = 0; index < WARMUP; index += 1) await send();
  const cpuBefore = target.cpuMs();
  for (let index = 0; index < MESSAGES; index += 1) walls.push(await send());
  return { walls, cpu: (target.cpuMs() - cpuBefore) / MESSAGES };
}

const standIns = await startStandIns(PEER_MS);
const lines: string[] = [];
const row = (label: string, { walls, cpu }: { walls: number[]; cpu: number }, critical: number, serial: number) => {
  const p50 = percentile(walls, 50);
  const ratio = critical > 0 ? `${(p50 / critical).toFixed(2)}×` : '—';
  lines.push(`| ${label} | ${ms(critical)} | ${ms(serial)} | ${ms(p50)} | ${ms(percentile(walls, 90))} | ${ratio} | ${ms(p50 - critical)} | ${ms(cpu)} |`);
  step(`${label}: p50 ${ms(p50)} (critical path ${ms(critical)}, in sequence ${ms(serial)})`);
};
try {
  const load = loadavg()[0]!.toFixed(2);
  lines.push(
    `Peer latency ${PEER_MS} ms per request; ${MESSAGES} messages per row, one at a time, after ${WARMUP} to warm up; load average at the start ${load}.`,
    '',
  );
  lines.push(
    '| message | critical path | same calls in sequence | wall p50 | wall p90 | p50 / critical path | overhead (p50 − critical path) | conductor CPU per message |',
    '|---|---|---|---|---|---|---|---|',
  );

  const offline = await conductor(standIns, {});
  try {
    // Searches (3), path, scene, simulation, one look at the simulation.
    standIns.latency.ms = PEER_MS;
    const withLatency = await measure(offline, standIns.token, README_REQUEST, 7);
    row('README request, offline planner', withLatency, 5 * PEER_MS, 9 * PEER_MS);
    standIns.latency.ms = 0;
    const instant = await measure(offline, standIns.token, README_REQUEST, 7);
    row('README request, peers answering at once', instant, 0, 0);
    standIns.latency.ms = PEER_MS;
  } finally {
    await offline.stop();
  }

  const scripted = await conductor(standIns, { OPENROUTER_BASE_URL: standIns.model, CONDUCTOR_MODEL: 'bench/scripted' });
  try {
    const path = (slug: string) => `/1800/june/1/1200/france/ile-de-france/paris/${slug}`;
    standIns.modelScript = [
      {
        calls: [
          ...['bastille', 'waterloo', 'coronation', 'austerlitz'].map((query) => ({ name: 'graph_search', arguments: { query } })),
          { name: 'find_path', arguments: { from_path: path('bastille'), to_path: path('waterloo') } },
          { name: 'traverse_moments', arguments: { path: path('coronation'), direction: 'future' } },
          { name: 'render_scene', arguments: { query: 'The coronation of Napoleon, 1804' } },
          { name: 'render_scene', arguments: { query: 'The battle of Austerlitz, 1805', preset: 'hyper' } },
        ],
      },
      { text: 'All eight answered.' },
    ];
    const wide = await measure(scripted, standIns.token, 'eight things at once', 8);
    // Scenes: charge, charge, second scene; the graph's six calls take one latency beside them.
    row('8 independent calls in one model turn', wide, 3 * PEER_MS, 10 * PEER_MS);
  } finally {
    await scripted.stop();
  }
  lines.push('');
  console.log(lines.join('\n'));
} finally {
  await standIns.close();
  await infra?.stop();
}
