/**
 * The gateway's proxy overhead: authenticated (Bearer JWT, resolved against PostgreSQL), rate-limited
 * (Redis, two windows) and proxied GETs to a trivial backend, beside the same backend called directly,
 * fast-gateway (npm), a bare proxy doing only the header contract (header-contract.ts) and nginx
 * proxy_pass (Debian's nginx, one worker), under wrk on loopback; then the added p50 latency, measured
 * sequentially.
 *
 *   node bench/gateway/run.ts   BENCH_DURATION (s per round, default 5), BENCH_ROUNDS (default 5), BENCH_CONNECTIONS (default 50)
 *
 * Uses DATABASE_URL / REDIS_URL when set, otherwise starts PostgreSQL and Redis like `npm test`.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { request } from 'undici';
import { freePort, startInfra } from '../../scripts/infra.ts';
import { ensureCommands, wrk } from '../support/wrk.ts';
import { createDatabase } from '../../test/support/database.ts';

const DURATION = Number(process.env.BENCH_DURATION ?? 5);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50);
const LATENCY_SAMPLES = Number(process.env.BENCH_LATENCY_SAMPLES ?? 3000);
const here = fileURLToPath(new URL('.', import.meta.url));
const step = (message: string) => process.stderr.write(`[bench] ${message}\n`);
const children: ChildProcess[] = [];

function start(script: string, env: Record<string, string>): Promise<ChildProcess> {
  const child = spawn(process.execPath, [script], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'inherit'] });
  children.push(child);
  return new Promise((resolve, reject) => {
    child.stdout!.on('data', (chunk: Buffer) => {
      if (String(chunk).includes('ready')) resolve(child);
    });
    child.once('exit', (code) => reject(new Error(`${script} exited with ${code}`)));
  });
}

async function waitFor(url: string, headers: Record<string, string> = {}): Promise<void> {
  for (let i = 0; i < 600; i += 1) {
    try {
      const response = await request(url, { headers });
      await response.body.text();
      if (response.statusCode === 200) return;
    } catch {
      // not yet
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`${url} never answered 200`);
}

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
  const children = spawnSync('pgrep', ['-P', String(pid)], { encoding: 'utf8' }).stdout.split('\n').filter(Boolean).map(Number);
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

/** Sequential requests on one keep-alive connection: the latency a single request sees. */
async function sequentialP50(url: string, headers: Record<string, string> = {}): Promise<number> {
  const samples: number[] = [];
  for (let i = 0; i < LATENCY_SAMPLES; i += 1) {
    const started = performance.now();
    const response = await request(url, { headers });
    await response.body.text();
    if (i >= 200) samples.push(performance.now() - started);
  }
  samples.sort((a, b) => a - b);
  return samples[Math.floor(samples.length / 2)]!;
}

// The load generator and the peer come from Debian when they are missing (as PostgreSQL and Redis do).
ensureCommands([['wrk', 'wrk'], ['nginx', 'nginx-light']]);
const loadBefore = loadavg().map((value) => value.toFixed(1)).join(' / ');
const infra = await startInfra();
Object.assign(process.env, infra.env);
const work = mkdtempSync(join(tmpdir(), 'tempora-gateway-bench-'));
let nginx: ChildProcess | undefined;
try {
  const backendPort = await freePort();
  const backendProcess = await start(join(here, 'backend.ts'), { PORT: String(backendPort) });
  const backend = `http://127.0.0.1:${backendPort}`;

  const gatewayPort = await freePort();
  const database = await createDatabase('gateway_bench');
  const gateway = spawn(process.execPath, [join(here, '../../services/gateway/src/main.ts')], {
    env: {
      ...process.env,
      DATABASE_URL: database,
      PORT: String(gatewayPort),
      HOST: '127.0.0.1',
      TEMPORA_DATA_DIR: work,
      ADMIN_KEY: 'bench-admin-key',
      SERVICE_KEY: 'bench-service-key',
      GENERATION_URL: backend,
      // Limits are checked on every request but set out of reach, so the figures measure the work, not 429s.
      RATE_LIMIT_MULTIPLIER: '100000',
      LOG_LEVEL: 'warn',
      OTEL_SDK_DISABLED: 'true',
    },
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  children.push(gateway);
  const gatewayUrl = `http://127.0.0.1:${gatewayPort}`;
  await waitFor(`${gatewayUrl}/health`);
  const signIn = await request(`${gatewayUrl}/api/v1/auth/dev/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-admin-key': 'bench-admin-key' },
    body: JSON.stringify({ external_id: 'bench', tier: 'enterprise' }),
  });
  const { access_token: token } = (await signIn.body.json()) as { access_token: string };
  const auth = { authorization: `Bearer ${token}` };
  await waitFor(`${gatewayUrl}/api/v1/bench`, auth);

  const proxyPort = await freePort();
  const fastGateway = await start(join(here, 'fast-gateway.ts'), { PORT: String(proxyPort), TARGET: backend });
  const contractPort = await freePort();
  const contract = await start(join(here, 'header-contract.ts'), { PORT: String(contractPort), TARGET: backend });

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
  upstream backend { server 127.0.0.1:${backendPort}; keepalive 64; }
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
  const targets: Array<[string, string, Record<string, string>, number | undefined]> = [
    ['backend, direct', `${backend}/api/v1/bench`, {}, backendProcess.pid],
    ['gateway (JWT + user lookup + rate limit + proxy)', `${gatewayUrl}/api/v1/bench`, auth, gateway.pid],
    ['fast-gateway', `http://127.0.0.1:${proxyPort}/api/v1/bench`, {}, fastGateway.pid],
    ['bare proxy with the header contract only', `http://127.0.0.1:${contractPort}/api/v1/bench`, {}, contract.pid],
    ...(nginxUrl ? [['nginx proxy_pass (1 worker)', `${nginxUrl}/api/v1/bench`, {}, nginx?.pid] as [string, string, Record<string, string>, number | undefined]] : []),
  ];
  const rounds = new Map<string, Figures[]>();
  for (let round = 0; round < ROUNDS; round += 1) {
    for (let i = 0; i < targets.length; i += 1) {
      const [name, url, headers, pid] = targets[(round + i) % targets.length]!;
      rounds.set(name, [...(rounds.get(name) ?? []), await load(name, url, headers, pid)]);
    }
  }
  const results: Figures[] = targets.map(([name]) => {
    const sorted = [...rounds.get(name)!].sort((a, b) => a.rps - b.rps);
    return sorted[Math.floor(sorted.length / 2)]!;
  });

  step(`sequential latency, ${LATENCY_SAMPLES} requests each`);
  const directP50 = await sequentialP50(`${backend}/api/v1/bench`);
  const gatewayP50 = await sequentialP50(`${gatewayUrl}/api/v1/bench`, auth);

  const byName = (prefix: string) => results.find((r) => r.name.startsWith(prefix));
  const gatewayRps = byName('gateway')!.rps;
  const lines = [
    `| target | requests/s | p50 ms | p99 ms | CPU µs per request | errors | non-2xx |`,
    `|---|---|---|---|---|---|---|`,
    ...results.map((r) => `| ${r.name} | ${Math.round(r.rps).toLocaleString('en-US')} | ${r.p50.toFixed(2)} | ${r.p99.toFixed(2)} | ${Math.round(r.cpuMicros)} | ${r.errors} | ${r.non2xx} |`),
    '',
    `gateway / fast-gateway: ${(gatewayRps / byName('fast-gateway')!.rps).toFixed(2)}× (target ≥ 1.0×)`,
    ...(byName('nginx') ? [`gateway / nginx: ${((100 * gatewayRps) / byName('nginx')!.rps).toFixed(0)}% (target ≥ 35%)`] : []),
    `added p50 latency (sequential, one connection): ${(gatewayP50 - directP50).toFixed(3)} ms (gateway ${gatewayP50.toFixed(3)} ms, direct ${directP50.toFixed(3)} ms; target ≤ 1 ms)`,
    `(median of ${ROUNDS} interleaved rounds of ${DURATION} s per target, ${CONNECTIONS} connections, wrk with one thread, ${cpus().length} CPUs shared by every process; load average before the run ${loadBefore})`,
  ];
  process.stdout.write(`${lines.join('\n')}\n`);
} finally {
  nginx?.kill('SIGTERM');
  for (const child of children) child.kill('SIGTERM');
  await infra.stop();
  spawnSync('true');
}
