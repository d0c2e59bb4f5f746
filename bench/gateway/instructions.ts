/**
 * Instructions per proxied request, counted by callgrind: the gateway beside fast-gateway and the
 * header-contract proxy, each alone under valgrind, the same fixed number of GETs each. Requests per second
 * on this shared machine move by a fifth between rounds of the same process; instruction counts repeat
 * within about 1%, so they settle what throughput cannot (they leave out the kernel's time, which is the
 * same for these Node proxies: the same reads and writes per request).
 *
 *   npm run bench:gateway:instructions BENCH_WARMUP (requests before counting, default 60000), BENCH_REQUESTS (counted, default 10000)
 *
 * Uses DATABASE_URL / REDIS_URL when set, otherwise starts PostgreSQL and Redis like `npm test`; valgrind
 * is installed from Debian when missing. Takes a few minutes: everything runs about fifty times slower.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Agent, request } from 'undici';
import { startInfra } from '../../scripts/infra.ts';
import { ensureCommands } from '../support/wrk.ts';
import { type Target, Targets } from './targets.ts';

const WARMUP = Number(process.env.BENCH_WARMUP ?? 60_000);
const REQUESTS = Number(process.env.BENCH_REQUESTS ?? 10_000);
const CONNECTIONS = 50;
const step = (message: string) => process.stderr.write(`[bench] ${message}\n`);

/** `count` GETs over CONNECTIONS keep-alive connections; fails on any answer but 200. */
async function send(target: Target, count: number): Promise<void> {
  const agent = new Agent({ connections: CONNECTIONS, pipelining: 1 });
  let left = count;
  const worker = async () => {
    // Taken before the request is sent, so the workers together send exactly `count`.
    while (left > 0) {
      left -= 1;
      const response = await request(target.url, { dispatcher: agent, headers: target.headers });
      await response.body.dump();
      if (response.statusCode !== 200) throw new Error(`${target.name} answered ${response.statusCode}`);
    }
  };
  try {
    await Promise.all(Array.from({ length: CONNECTIONS }, worker));
  } finally {
    await agent.close();
  }
}

/** callgrind_control finds the process by a file named after its HOST variable, so it runs with the target's environment. */
function control(target: Target, ...args: string[]): void {
  const result = spawnSync('callgrind_control', [...args, String(target.process.pid)], { env: target.env, encoding: 'utf8' });
  if (result.status !== 0) throw new Error(`callgrind_control ${args.join(' ')}: ${result.stderr || result.stdout}`);
}

interface Count {
  total: number;
  /** V8's optimizing compilers at work (TurboFan, Maglev): tiering up still going on, not the request's own work. */
  compiling: number;
}

/** Instructions in a callgrind dump, and those spent in V8's compilers (by function name). */
function countOf(file: string): Count {
  const annotated = spawnSync('callgrind_annotate', ['--threshold=100', '--inclusive=no', file], { encoding: 'utf8', maxBuffer: 1 << 28 }).stdout;
  const total = Number(/^\s*([\d,]+) \([^)]*\)\s+PROGRAM TOTALS/m.exec(annotated)?.[1]?.replaceAll(',', '') ?? NaN);
  let compiling = 0;
  for (const line of annotated.split('\n')) {
    const match = /^\s*([\d,]+) \(/.exec(line);
    if (match && /v8::internal::(compiler|maglev|turboshaft)::/i.test(line)) compiling += Number(match[1]!.replaceAll(',', ''));
  }
  return { total, compiling };
}

async function measure(targets: Targets, target: Target, dir: string): Promise<Count> {
  step(`${target.name}: ${WARMUP} requests to warm up, then ${REQUESTS} counted`);
  await send(target, WARMUP);
  control(target, '--instr=on');
  await send(target, REQUESTS);
  control(target, '--dump');
  await targets.stop(target);
  const dump = readdirSync(dir).find((name) => name.startsWith(`${target.process.pid}.`) && name.endsWith('.1'));
  if (!dump) throw new Error(`${target.name}: callgrind wrote no dump`);
  return countOf(join(dir, dump));
}

ensureCommands([
  ['valgrind', 'valgrind'],
  ['callgrind_control', 'valgrind'],
]);
const infra = await startInfra();
Object.assign(process.env, infra.env);
const work = mkdtempSync(join(tmpdir(), 'tempora-gateway-instructions-'));
const dumps = mkdtempSync(join(tmpdir(), 'tempora-callgrind-'));
// Counting starts once warmed up; V8 generates code at run time, so callgrind must watch for it.
const callgrind = new Targets(() => ['valgrind', '--tool=callgrind', '--instr-atstart=no', '--smc-check=all-non-file', `--callgrind-out-file=${dumps}/%p.out`]);
const plain = new Targets();
try {
  const backend = new URL((await plain.backend()).url).origin;
  const rows: Array<[string, Count]> = [];
  // The gateway checks a credential again once its cache entry is a second old: at full speed once in
  // about 15,000 requests, under callgrind's slowdown once in a few hundred. Kept for the whole run, the
  // count is of the requests themselves.
  const gateway = () => callgrind.gateway(backend, work, { AUTH_CACHE_MS: '3600000' });
  for (const start of [gateway, () => callgrind.fastGateway(backend), () => callgrind.headerContract(backend)]) {
    const target = await start();
    rows.push([target.name, await measure(callgrind, target, dumps)]);
  }
  const perRequest = (value: number) => Math.round(value / REQUESTS).toLocaleString('en-US');
  const lines = [
    '| target | instructions per request | of which V8 compiling | the rest |',
    '|---|---|---|---|',
    ...rows.map(([name, count]) => `| ${name} | ${perRequest(count.total)} | ${perRequest(count.compiling)} | ${perRequest(count.total - count.compiling)} |`),
    '',
    `gateway / fast-gateway, the rest: ${((rows[0]![1].total - rows[0]![1].compiling) / (rows[1]![1].total - rows[1]![1].compiling)).toFixed(2)}× the instructions`,
    `(callgrind, user-space instructions of the target's process and its threads; ${REQUESTS} GETs counted after ${WARMUP} to warm up, ${CONNECTIONS} connections)`,
  ];
  process.stdout.write(`${lines.join('\n')}\n`);
} finally {
  callgrind.stopAll();
  plain.stopAll();
  await infra.stop();
}
// The callgrind dumps are large and of no use once counted.
for (const dir of [dumps, work]) rmSync(dir, { recursive: true, force: true });
