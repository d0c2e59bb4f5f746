/**
 * The gateway's proxy overhead: authenticated (Bearer JWT, resolved against PostgreSQL), rate-limited
 * (Redis, two windows) and proxied GETs to a trivial backend, beside the same backend called directly,
 * fast-gateway (npm), a bare proxy doing only the header contract (header-contract.ts) and nginx
 * proxy_pass (Debian's nginx, one worker), under wrk on loopback; then the added p50 latency, measured
 * sequentially.
 *
 *   npm run bench:gateway BENCH_DURATION (s per round, default 5), BENCH_ROUNDS (default 5), BENCH_CONNECTIONS (default 50)
 *
 * Uses DATABASE_URL / REDIS_URL when set, otherwise starts PostgreSQL and Redis like `npm test`.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { Agent, request } from 'undici';
import { freePort, startInfra } from '../../scripts/infra.ts';
import { ensureCommands, wrk } from '../support/wrk.ts';
import { Targets, waitFor } from './targets.ts';

const DURATION = Number(process.env.BENCH_DURATION ?? 5);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50);
const LATENCY_SAMPLES = Number(process.env.BENCH_LATENCY_SAMPLES ?? 3000);
const step = (message: string) => process.stderr.write(`[bench] ${message}\n`);

interface Figures {
  name: string;
  rps: number;
  p50: number;
  p99: number;
  errors: number;
  non2xx: number;
  /** CPU time the target's process spent per request (µs): steadier than requests/s on a shared machine. */
  cpuMicros: number;
}

/** CPU seconds (user + system) used so far by a process and its children (nginx's worker). */
function cpuSeconds(pid: number): number {
  const ticks = (id: number) => {
    const fields = readFileSync(`/proc/${id}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return Number(fields[11]) + Number(fields[12]);
  };
  const children = spawnSync('pgrep', ['-P', String(pid)], { encoding: 'utf8' })
    .stdout.split('\n')
    .filter(Boolean)
    .map(Number);
  return [pid, ...children].reduce((sum, id) => sum + ticks(id), 0) / 100;
}

async function load(name: string, url: string, headers: Record<string, string>, pid: number | undefined): Promise<Figures> {
  step(`${name}: warm-up, then ${DURATION} s with ${CONNECTIONS} connections`);
  wrk({ url, headers, seconds: 1, connections: CONNECTIONS });
  const before = pid ? cpuSeconds(pid) : 0;
  const result = wrk({ url, headers, seconds: DURATION, connections: CONNECTIONS });
  if (result.total === 0) throw new Error(`${name}: no request was answered (did the target exit?)`);
  const cpuMicros = pid && result.total > 0 ? ((cpuSeconds(pid) - before) * 1e6) / result.total : NaN;
  return { name, rps: result.rps, p50: result.p50, p99: result.p99, errors: result.errors, non2xx: result.non2xx, cpuMicros };
}

/**
 * Sequential requests on one keep-alive connection of its own: the latency a single request sees. (A
 * pooled connection from before could have been closed by the server while wrk held the event loop.)
 */
async function sequentialP50(url: string, headers: Record<string, string> = {}): Promise<number> {
  const samples: number[] = [];
  const connection = new Agent({ connections: 1 });
  try {
    for (let i = 0; i < LATENCY_SAMPLES; i += 1) {
      const started = performance.now();
      const response = await request(url, { headers, dispatcher: connection });
      await response.body.text();
      if (i >= 200) samples.push(performance.now() - started);
    }
  } finally {
    await connection.close();
  }
  samples.sort((a, b) => a - b);
  return samples[Math.floor(samples.length / 2)]!;
}

// The load generator and the peer come from Debian when they are missing (as PostgreSQL and Redis do).
ensureCommands([
  ['wrk', 'wrk'],
  ['nginx', 'nginx-light'],
]);
const loadBefore = loadavg()
  .map((value) => value.toFixed(1))
  .join(' / ');
const infra = await startInfra();
Object.assign(process.env, infra.env);
const work = mkdtempSync(join(tmpdir(), 'tempora-gateway-bench-'));
const targets = new Targets();
let nginx: ChildProcess | undefined;
try {
  const backendTarget = await targets.backend();
  const backend = new URL(backendTarget.url).origin;
  const gateway = await targets.gateway(backend, work);
  const fastGateway = await targets.fastGateway(backend);
  const contract = await targets.headerContract(backend);

  let nginxUrl: string | undefined;
  const nginxBin = ['/usr/sbin/nginx', '/usr/bin/nginx'].find((path) => existsSync(path));
  if (nginxBin) {
    const nginxPort = await freePort();
    const conf = join(work, 'nginx.conf');
    writeFileSync(
      conf,
      `worker_processes 1;
daemon off;
pid ${join(work, 'nginx.pid')};
error_log ${join(work, 'nginx-error.log')} warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path ${work}/body; proxy_temp_path ${work}/proxy; fastcgi_temp_path ${work}/fastcgi; uwsgi_temp_path ${work}/uwsgi; scgi_temp_path ${work}/scgi;
  upstream backend { server ${new URL(backend).host}; keepalive 64; }
  server {
    listen 127.0.0.1:${nginxPort};
    location / { proxy_pass http://backend; proxy_http_version 1.1; proxy_set_header Connection ""; }
  }
}
`,
    );
    nginx = spawn(nginxBin, ['-c', conf, '-p', work], { stdio: 'inherit' });
    nginxUrl = `http://127.0.0.1:${nginxPort}`;
    await waitFor(`${nginxUrl}/api/v1/bench`);
  } else {
    step('nginx is not installed (apt-get install nginx-light): skipped');
  }

  // Rounds interleave the targets, so a burst of load from elsewhere on the machine does not land on one
  // target only; each target's figures are the median round (by requests/s). Each round starts one target
  // further on, so no target always follows the same one: after the direct round the backend's heap is
  // tidied up in the background, which took CPU from whichever target came next.
  const measured: Array<[string, string, Record<string, string>, number | undefined]> = [
    ...[backendTarget, gateway, fastGateway, contract].map(
      (t) => [t.name, t.url, t.headers, t.process.pid] as [string, string, Record<string, string>, number | undefined],
    ),
    ...(nginxUrl
      ? [['nginx proxy_pass (1 worker)', `${nginxUrl}/api/v1/bench`, {}, nginx?.pid] as [string, string, Record<string, string>, number | undefined]]
      : []),
  ];
  const rounds = new Map<string, Figures[]>();
  for (let round = 0; round < ROUNDS; round += 1) {
    for (let i = 0; i < measured.length; i += 1) {
      const [name, url, headers, pid] = measured[(round + i) % measured.length]!;
      rounds.set(name, [...(rounds.get(name) ?? []), await load(name, url, headers, pid)]);
    }
  }
  const results: Figures[] = measured.map(([name]) => {
    const sorted = [...rounds.get(name)!].sort((a, b) => a.rps - b.rps);
    return sorted[Math.floor(sorted.length / 2)]!;
  });

  step(`sequential latency, ${LATENCY_SAMPLES} requests each`);
  const directP50 = await sequentialP50(backendTarget.url);
  const gatewayP50 = await sequentialP50(gateway.url, gateway.headers);

  const byName = (prefix: string) => results.find((r) => r.name.startsWith(prefix));
  const gatewayRps = byName('gateway')!.rps;
  const lines = [
    `| target | requests/s | p50 ms | p99 ms | CPU µs per request | errors | non-2xx |`,
    `|---|---|---|---|---|---|---|`,
    ...results.map(
      (r) =>
        `| ${r.name} | ${Math.round(r.rps).toLocaleString('en-US')} | ${r.p50.toFixed(2)} | ${r.p99.toFixed(2)} | ${Math.round(r.cpuMicros)} | ${r.errors} | ${r.non2xx} |`,
    ),
    '',
    `gateway / fast-gateway: ${(gatewayRps / byName('fast-gateway')!.rps).toFixed(2)}× (target ≥ 1.0×)`,
    ...(byName('nginx') ? [`gateway / nginx: ${((100 * gatewayRps) / byName('nginx')!.rps).toFixed(0)}% (target ≥ 35%)`] : []),
    `added p50 latency (sequential, one connection): ${(gatewayP50 - directP50).toFixed(3)} ms (gateway ${gatewayP50.toFixed(3)} ms, direct ${directP50.toFixed(3)} ms; target ≤ 1 ms)`,
    `(median of ${ROUNDS} interleaved rounds of ${DURATION} s per target, ${CONNECTIONS} connections, wrk with one thread, ${cpus().length} CPUs shared by every process; load average before the run ${loadBefore})`,
  ];
  process.stdout.write(`${lines.join('\n')}\n`);
} finally {
  nginx?.kill('SIGTERM');
  targets.stopAll();
  await infra.stop();
  spawnSync('true');
}
