/**
 * Soak through the gateway: `npm run bench:soak -- [--seconds 120] [--rate 20] [--users 4] [--sample 5] [--warmup 20]`;
 * the long variant `--seconds 1800 --sample 30 --warmup 120`. Figures in bench/README.md.
 *
 * The platform as `npm start` runs it on PostgreSQL and Redis (DATABASE_URL / REDIS_URL when set, a fresh
 * database on that server; else both started like `npm test`), driven through the gateway on loopback by
 * an open-loop mix at a fixed rate: request i leaves at start + i / rate whatever the answers before it,
 * and its latency counts from that moment, so a slow platform shows as latency and not as fewer requests.
 * Demo users, granted credits with the development admin key so that no call meets an empty balance, take
 * the calls in turn.
 *
 * Every `--sample` seconds: each service process's RSS (/proc/<pid>/status) and open descriptors
 * (/proc/<pid>/fd), and the window's latency percentiles and errors per route class; after the load and
 * 15 s of quiet, each process's descriptors by what they are (connections by peer). At the end, once the
 * followed simulation jobs are settled: every call the client saw charged (X-Credits-Charged) has exactly
 * one charge in the gateway's ledger with that amount (matched by the X-Request-ID the client sent, which
 * the gateway records with the charge), every refunded call its one refund, no charge belongs to no call,
 * and each user's balance is the sum of its ledger. Exits 1 when the reconciliation fails.
 */
import { randomUUID } from 'node:crypto';
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { startInfra } from '../../scripts/infra.ts';
import { createDatabase, dropDatabase } from '../../test/support/database.ts';
import { startPlatform } from '../../test/support/platform.ts';

const { values: args } = parseArgs({
  options: {
    seconds: { type: 'string', default: '120' },
    rate: { type: 'string', default: '20' },
    users: { type: 'string', default: '4' },
    sample: { type: 'string', default: '5' },
    warmup: { type: 'string', default: '20' },
  },
});
const SECONDS = Number(args.seconds);
const RATE = Number(args.rate);
const USERS = Number(args.users);
const SAMPLE_S = Number(args.sample);
/** Seconds left out of the slopes: JIT, pools and caches filling. */
const WARMUP_S = Math.min(Number(args.warmup), SECONDS / 4);
/** Flat: a least-squares slope after warm-up below these. */
const RSS_FLAT_MIB_PER_MIN = 2;
const FD_FLAT_PER_MIN = 1;
/** Quiet seconds after the load before the last look at each process's descriptors. */
const IDLE_S = 15;
const ADMIN = { 'X-Admin-Key': 'dev-admin-key' };
const BASTILLE = '1789/july/14/1530/france/ile-de-france/paris/storming-of-the-bastille';
const step = (message: string) => process.stderr.write(`[soak] ${message}\n`);

/** The mix: each class's share of the calls and the request it makes. */
interface Kind {
  name: string;
  weight: number;
  charged: boolean;
  request: () => { method: 'GET' | 'POST'; path: string; body?: unknown };
}
const QUERIES = ['rome', 'revolution', 'printing press', 'treaty', 'war', 'empire', 'paris', 'plague'];
const pick = <T>(list: T[]) => list[Math.floor(Math.random() * list.length)]!;
const MIX: Kind[] = [
  {
    name: 'traverse',
    weight: 3,
    charged: false,
    request: () => ({ method: 'GET', path: `/api/v1/graph/traverse/${BASTILLE}?direction=${pick(['future', 'past', 'both'])}&depth=2` }),
  },
  {
    name: 'moments',
    weight: 3,
    charged: false,
    request: () => ({ method: 'GET', path: `/api/v1/graph/moments?q=${encodeURIComponent(pick(QUERIES))}&limit=10` }),
  },
  {
    name: 'search',
    weight: 3,
    charged: false,
    request: () => ({ method: 'GET', path: `/api/v1/graph/search?q=${encodeURIComponent(pick(QUERIES))}&limit=10` }),
  },
  { name: 'balance', weight: 3, charged: false, request: () => ({ method: 'GET', path: '/api/v1/credits/balance' }) },
  {
    name: 'generate',
    weight: 2,
    charged: true,
    request: () => ({
      method: 'POST',
      path: '/api/v1/timepoints/generate/sync',
      body: { query: `${pick(QUERIES)} in ${1000 + Math.floor(Math.random() * 900)}`, preset: 'hyper' },
    }),
  },
  {
    name: 'simulate',
    weight: 1,
    charged: true,
    request: () => ({ method: 'POST', path: '/api/v1/simulate', body: { prompt: `What if the ${pick(QUERIES)} had gone otherwise`, fidelity: 1 } }),
  },
  // Priced and charged by the gateway, refused by the simulation service (a prompt under 3 characters): the
  // refund path, which the reconciliation must find as one refund per charge.
  { name: 'refused', weight: 1, charged: true, request: () => ({ method: 'POST', path: '/api/v1/simulate', body: { prompt: 'x', fidelity: 1 } }) },
];
const WHEEL = MIX.flatMap((kind) => Array.from({ length: kind.weight }, () => kind));

interface Call {
  kind: string;
  user: number;
  requestId: string;
  /** When it was due to leave (ms since the run's start): latency counts from here. */
  due: number;
  ms: number;
  status: number;
  charged: number | undefined;
  location?: string;
}

interface Sample {
  at: number;
  processes: Record<string, { rss: number; fds: number }>;
}

/** The service and worker processes npm start runs, by name: the children of its start.ts. */
function platformProcesses(): Record<string, number> {
  const childrenOf = (parent: number) =>
    readdirSync('/proc')
      .filter((entry) => /^\d+$/.test(entry))
      .filter((pid) => {
        try {
          return Number(readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ')[1]) === parent;
        } catch {
          return false;
        }
      })
      .map(Number);
  const commandOf = (pid: number) => readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean);
  const start = childrenOf(process.pid).find((pid) => commandOf(pid).some((arg) => arg.endsWith('scripts/start.ts')));
  if (!start) throw new Error('npm start’s process not found');
  const found: Record<string, number> = {};
  for (const pid of childrenOf(start)) {
    const command = commandOf(pid);
    const script = command.find((arg) => arg.endsWith('.ts'))!;
    const service = /services\/([a-z]+)\/src\/main\.ts$/.exec(script)?.[1];
    const worker = /services\/([a-z]+)\/src\/worker\.ts$/.exec(script)?.[1];
    const name = service ?? (worker ? `${worker}-${command.at(-1)!.endsWith('.ts') ? 'worker' : command.at(-1)}` : 'stripe-stand-in');
    found[name] = pid;
  }
  return found;
}

function measure(pid: number): { rss: number; fds: number } {
  const rss = Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) / 1024;
  return { rss, fds: readdirSync(`/proc/${pid}/fd`).length };
}

/** A process's descriptors by what they are: connections by the peer they reach, listening sockets, the rest. */
function descriptorsOf(pid: number, peers: Record<number, string>): string {
  const sockets = new Map<string, string>();
  for (const table of ['tcp', 'tcp6']) {
    for (const line of readFileSync(`/proc/${pid}/net/${table}`, 'utf8').split('\n').slice(1)) {
      const fields = line.trim().split(/\s+/);
      if (fields.length < 10) continue;
      const [local, remote, state, inode] = [fields[1]!, fields[2]!, fields[3]!, fields[9]!];
      const remotePort = parseInt(remote.split(':')[1]!, 16);
      const localPort = parseInt(local.split(':')[1]!, 16);
      sockets.set(inode, state === '0A' ? 'listening' : peers[remotePort] ? `to ${peers[remotePort]}` : peers[localPort] ? 'from clients' : 'other tcp');
    }
  }
  const counts: Record<string, number> = {};
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    let kind = 'other';
    try {
      const target = readlinkSync(`/proc/${pid}/fd/${fd}`);
      const inode = /^socket:\[(\d+)\]$/.exec(target)?.[1];
      kind = inode ? (sockets.get(inode) ?? 'other socket') : target.startsWith('anon_inode:') ? 'epoll/event' : target.startsWith('pipe:') ? 'pipe' : 'file';
    } catch {
      continue;
    }
    counts[kind] = (counts[kind] ?? 0) + 1;
  }
  return Object.entries(counts)
    .sort((a, b) => b[1] - a[1])
    .map(([kind, count]) => `${count} ${kind}`)
    .join(', ');
}

const percentile = (sorted: number[], p: number) => (sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))]! : NaN);
/** Least-squares slope of y over x. */
function slope(points: Array<[number, number]>): number {
  const n = points.length;
  if (n < 2) return NaN;
  const mx = points.reduce((s, [x]) => s + x, 0) / n;
  const my = points.reduce((s, [, y]) => s + y, 0) / n;
  const sxy = points.reduce((s, [x, y]) => s + (x - mx) * (y - my), 0);
  const sxx = points.reduce((s, [x]) => s + (x - mx) ** 2, 0);
  return sxy / sxx;
}
const table = (head: string[], rows: Array<Array<string | number>>) =>
  [`| ${head.join(' | ')} |`, `|${head.map(() => '---').join('|')}|`, ...rows.map((row) => `| ${row.join(' | ')} |`)].join('\n');
const fixed = (value: number, digits = 1) => (Number.isFinite(value) ? value.toFixed(digits) : '—');

const infra = await startInfra();
Object.assign(process.env, infra.env);
const databaseUrl = await createDatabase('soak');
const loads: number[][] = [loadavg()];
let exitCode = 1;
let platform: Awaited<ReturnType<typeof startPlatform>> | undefined;
try {
  step('starting the platform (seeding the graph takes a minute)…');
  platform = await startPlatform({ shared: { databaseUrl, redisUrl: infra.env.REDIS_URL! }, env: { RATE_LIMIT_MULTIPLIER: '1000' } });
  const gateway = platform.urls.gateway;
  const processes = platformProcesses();
  step(
    `processes: ${Object.entries(processes)
      .map(([name, pid]) => `${name} ${pid}`)
      .join(', ')}`,
  );

  const users: Array<{ id: string; auth: string }> = [];
  for (let i = 0; i < USERS; i += 1) {
    const signIn = await fetch(`${gateway}/api/v1/auth/demo`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    const token = ((await signIn.json()) as { access_token: string }).access_token;
    const auth = `Bearer ${token}`;
    const me = (await (await fetch(`${gateway}/api/v1/auth/me`, { headers: { authorization: auth } })).json()) as { id: string };
    const grant = await fetch(`${gateway}/api/v1/credits/admin/grant`, {
      method: 'POST',
      headers: { ...ADMIN, 'content-type': 'application/json' },
      body: JSON.stringify({ user_id: me.id, amount: 1_000_000, idempotency_key: `soak-${me.id}`, reason: 'soak' }),
    });
    if (grant.status !== 201) throw new Error(`grant answered ${grant.status}: ${await grant.text()}`);
    users.push({ id: me.id, auth });
  }

  const calls: Call[] = [];
  const samples: Sample[] = [];
  const inFlight = new Set<Promise<void>>();
  const t0 = performance.now();
  const now = () => performance.now() - t0;

  async function send(index: number, due: number): Promise<void> {
    const kind = WHEEL[index % WHEEL.length]!;
    const user = index % users.length;
    const { method, path, body } = kind.request();
    const requestId = randomUUID();
    const headers: Record<string, string> = { authorization: users[user]!.auth, 'x-request-id': requestId };
    if (body) headers['content-type'] = 'application/json';
    const call: Call = { kind: kind.name, user, requestId, due, ms: 0, status: 0, charged: undefined };
    try {
      const response = await fetch(`${gateway}${path}`, {
        method,
        headers,
        body: body ? JSON.stringify(body) : undefined,
        signal: AbortSignal.timeout(60_000),
      });
      await response.arrayBuffer();
      call.status = response.status;
      const charged = response.headers.get('x-credits-charged');
      call.charged = charged === null ? undefined : Number(charged);
      call.location = response.headers.get('location') ?? undefined;
    } catch {
      call.status = 0;
    }
    call.ms = now() - due;
    calls.push(call);
  }

  const windowOf = (call: Call) => Math.floor(call.due / 1000 / SAMPLE_S);
  function sample(): void {
    const at = now();
    const entry: Sample = { at, processes: {} };
    for (const [name, pid] of Object.entries(processes)) entry.processes[name] = measure(pid);
    samples.push(entry);
    loads.push(loadavg());
  }

  step(`${SECONDS} s at ${RATE} requests/s, ${USERS} users; a sample every ${SAMPLE_S} s`);
  sample();
  const sampler = setInterval(sample, SAMPLE_S * 1000);
  const total = Math.round(SECONDS * RATE);
  for (let i = 0; i < total; i += 1) {
    const due = (i * 1000) / RATE;
    const wait = due - now();
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
    const pending = send(i, due).finally(() => inFlight.delete(pending));
    inFlight.add(pending);
  }
  const sendLag = now() - ((total - 1) * 1000) / RATE;
  await Promise.all(inFlight);
  clearInterval(sampler);
  sample();
  step(`sent ${total} (the last ${fixed(sendLag)} ms behind its schedule); settling followed jobs…`);

  const db = new pg.Client({ connectionString: databaseUrl });
  await db.connect();
  // A simulation answered 202 is followed by the gateway until its job ends, and refunded if it fails.
  const settleDeadline = Date.now() + 120_000;
  let pendingJobs = 0;
  do {
    pendingJobs = Number((await db.query('select count(*) as n from charged_jobs')).rows[0].n);
    if (pendingJobs > 0) await new Promise((resolve) => setTimeout(resolve, 1000));
  } while (pendingJobs > 0 && Date.now() < settleDeadline);

  // Reconciliation.
  const problems: string[] = [];
  const userIds = users.map((user) => user.id);
  const ledger = (
    await db.query(
      "select id, user_id, amount, kind, refund_of, metadata->>'request_id' as request_id from credit_ledger where user_id = any($1) order by id",
      [userIds],
    )
  ).rows as Array<{
    id: string;
    user_id: string;
    amount: string;
    kind: string;
    refund_of: string | null;
    request_id: string | null;
  }>;
  const chargesByRequest = new Map<string, typeof ledger>();
  for (const entry of ledger.filter((entry) => entry.kind === 'charge' && entry.request_id))
    chargesByRequest.set(entry.request_id!, [...(chargesByRequest.get(entry.request_id!) ?? []), entry]);
  const refundsOf = new Map<string, typeof ledger>();
  for (const entry of ledger.filter((entry) => entry.kind === 'refund')) refundsOf.set(entry.refund_of!, [...(refundsOf.get(entry.refund_of!) ?? []), entry]);
  const byRequest = new Map(calls.map((call) => [call.requestId, call]));
  let chargedSeen = 0;
  let refundedBeforeAnswer = 0;
  let refundedAfterAnswer = 0;
  let creditsCharged = 0;
  for (const call of calls) {
    const charges = chargesByRequest.get(call.requestId) ?? [];
    const id = `${call.kind} ${call.requestId} (${call.status})`;
    if (charges.length > 1) problems.push(`${id}: ${charges.length} charges`);
    const charge = charges[0];
    const refunds = charge ? (refundsOf.get(charge.id) ?? []) : [];
    if (refunds.length > 1) problems.push(`${id}: ${refunds.length} refunds`);
    if (call.charged !== undefined && call.charged > 0) {
      chargedSeen += 1;
      if (!charge) problems.push(`${id}: charged ${call.charged} with no charge in the ledger`);
      else if (-Number(charge.amount) !== call.charged) problems.push(`${id}: charged ${call.charged}, ledger ${charge.amount}`);
      else if (refunds.length === 0) creditsCharged += call.charged;
      if (refunds.length === 1) refundedAfterAnswer += 1;
    } else if (charge) {
      // Charged and given back before the answer (X-Credits-Charged: 0), or no answer at all: one refund of the same amount.
      if (refunds.length !== 1) problems.push(`${id}: charged, answered ${call.charged ?? 'no header'}, ${refunds.length} refunds`);
      else if (Number(refunds[0]!.amount) !== -Number(charge.amount)) problems.push(`${id}: refund ${refunds[0]!.amount} of a charge of ${charge.amount}`);
      refundedBeforeAnswer += 1;
    }
    if (call.status >= 400 && call.charged! > 0) problems.push(`${id}: refused, yet answered X-Credits-Charged ${call.charged}`);
    if (call.status >= 200 && call.status < 300 && MIX.find((kind) => kind.name === call.kind)!.charged && !(call.charged! > 0))
      problems.push(`${id}: a charged route answered with X-Credits-Charged ${call.charged}`);
  }
  for (const requestId of chargesByRequest.keys()) if (!byRequest.has(requestId)) problems.push(`charge for request ${requestId}, which the client never sent`);
  for (const [refundOf, refunds] of refundsOf)
    if (!ledger.some((entry) => entry.id === refundOf && entry.kind === 'charge')) problems.push(`refund ${refunds[0]!.id} of no charge`);
  const balances = (
    await db.query(
      'select u.id, u.balance, coalesce(sum(l.amount), 0) as sum from users u left join credit_ledger l on l.user_id = u.id where u.id = any($1) group by u.id, u.balance',
      [userIds],
    )
  ).rows;
  for (const row of balances) if (Number(row.balance) !== Number(row.sum)) problems.push(`user ${row.id}: balance ${row.balance}, ledger sums to ${row.sum}`);
  if (pendingJobs > 0) problems.push(`${pendingJobs} followed jobs still pending after 120 s`);
  await db.end();
  // Idle again: the client's and the gateway's keep-alive connections time out (undici: 4 s), so what a
  // process still holds then against what it held idle before the run is what the run left behind.
  await new Promise((resolve) => setTimeout(resolve, IDLE_S * 1000));
  const idle = Object.fromEntries(Object.entries(processes).map(([name, pid]) => [name, measure(pid)]));
  const peers: Record<number, string> = { [Number(new URL(databaseUrl).port)]: 'postgres', [Number(new URL(infra.env.REDIS_URL!).port)]: 'redis' };
  for (const [service, url] of Object.entries(platform.urls)) peers[Number(new URL(url).port)] = service;
  const held = Object.fromEntries(Object.entries(processes).map(([name, pid]) => [name, descriptorsOf(pid, peers)]));

  // Figures.
  const warm = samples.filter((entry) => entry.at / 1000 >= WARMUP_S);
  const processRows = Object.keys(processes).map((name) => {
    const first = samples[0]!.processes[name]!;
    const afterWarmup = warm[0]!.processes[name]!;
    const last = samples.at(-1)!.processes[name]!;
    const rssSlope = slope(warm.map((entry) => [entry.at / 60_000, entry.processes[name]!.rss])) as number;
    const peakFds = Math.max(...samples.map((entry) => entry.processes[name]!.fds));
    // Descriptors follow the connection pools, which grow to the concurrency they meet and then stay:
    // flat is no growth over the second half of the load.
    const fdSlope = slope(samples.filter((entry) => entry.at / 1000 >= SECONDS / 2).map((entry) => [entry.at / 60_000, entry.processes[name]!.fds])) as number;
    const flat = rssSlope < RSS_FLAT_MIB_PER_MIN && fdSlope < FD_FLAT_PER_MIN;
    return [
      name,
      fixed(first.rss),
      fixed(afterWarmup.rss),
      fixed(last.rss),
      fixed(idle[name]!.rss),
      fixed(rssSlope, 2),
      first.fds,
      peakFds,
      last.fds,
      idle[name]!.fds,
      fixed(fdSlope, 2),
      flat ? 'flat' : 'GROWING',
    ];
  });
  const windows = [...new Set(calls.map(windowOf))].sort((a, b) => a - b);
  const firstWindow = windows.find((window) => window * SAMPLE_S >= WARMUP_S) ?? windows[0]!;
  // The last window holds only the calls due in it: the full one before a partial last.
  const lastWindow = windows.filter((window) => (window + 1) * SAMPLE_S <= SECONDS).at(-1) ?? windows.at(-1)!;
  const latencyRows: Array<Array<string | number>> = [];
  for (const kind of [...MIX.map((kind) => kind.name), 'all']) {
    const of = (window?: number) =>
      calls
        .filter((call) => (kind === 'all' || call.kind === kind) && (window === undefined || windowOf(call) === window))
        .map((call) => call.ms)
        .sort((a, b) => a - b);
    const row: Array<string | number> = [kind];
    for (const window of [firstWindow, lastWindow, undefined]) {
      const sorted = of(window);
      row.push(`${fixed(percentile(sorted, 0.5))} / ${fixed(percentile(sorted, 0.95))} / ${fixed(percentile(sorted, 0.99))}`);
    }
    const all = calls.filter((call) => kind === 'all' || call.kind === kind);
    const errors = all.filter((call) => call.status === 0 || call.status >= 400);
    const statuses = [...new Set(errors.map((call) => call.status))]
      .map((status) => `${status}×${errors.filter((call) => call.status === status).length}`)
      .join(' ');
    row.push(all.length, errors.length ? `${errors.length} (${statuses})` : 0);
    latencyRows.push(row);
  }
  const perWindow = windows.map((window) => {
    const inWindow = calls.filter((call) => windowOf(call) === window);
    const sorted = inWindow.map((call) => call.ms).sort((a, b) => a - b);
    return [
      `${window * SAMPLE_S}–${(window + 1) * SAMPLE_S}`,
      inWindow.length,
      fixed(percentile(sorted, 0.5)),
      fixed(percentile(sorted, 0.95)),
      fixed(percentile(sorted, 0.99)),
      inWindow.filter((call) => call.status === 0 || call.status >= 400).length,
    ];
  });
  const load1 = loads.map((load) => load[0]!);

  console.log(
    `\nSoak through the gateway: ${SECONDS} s at ${RATE} requests/s (${total} calls, open loop), ${USERS} users, samples every ${SAMPLE_S} s, warm-up ${WARMUP_S} s`,
  );
  console.log(
    `machine: ${cpus().length} cores, load average (1 min) ${fixed(Math.min(...load1))}–${fixed(Math.max(...load1))} during the run, mean ${fixed(load1.reduce((s, v) => s + v, 0) / load1.length)}\n`,
  );
  console.log(
    `Memory (RSS MiB) and open descriptors per process: before the load, after warm-up, at the end of the load and after ${IDLE_S} s idle; flat: RSS slope after warm-up below ${RSS_FLAT_MIB_PER_MIN} MiB/min and descriptors' slope over the load's second half below ${FD_FLAT_PER_MIN}/min:\n`,
  );
  console.log(
    table(
      [
        'process',
        'RSS start',
        `RSS at ${WARMUP_S} s`,
        'RSS end',
        'RSS idle',
        'RSS MiB/min',
        'FDs start',
        'FDs peak',
        'FDs end',
        'FDs idle',
        'FDs/min (2nd half)',
        '',
      ],
      processRows,
    ),
  );
  console.log(`\nDescriptors held after ${IDLE_S} s idle:\n`);
  console.log(
    table(
      ['process', 'descriptors'],
      Object.entries(held).map(([name, what]) => [name, what]),
    ),
  );
  console.log('\nDescriptors per sample:\n');
  console.log(
    table(
      ['process', ...samples.map((entry) => `${Math.round(entry.at / 1000)} s`)],
      Object.keys(processes).map((name) => [name, ...samples.map((entry) => entry.processes[name]!.fds)]),
    ),
  );
  console.log(
    `\nLatency ms p50 / p95 / p99 from the moment each call was due, window ${firstWindow * SAMPLE_S}–${(firstWindow + 1) * SAMPLE_S} s against ${lastWindow * SAMPLE_S}–${(lastWindow + 1) * SAMPLE_S} s and the whole run:\n`,
  );
  console.log(table(['class', 'first window', 'last window', 'whole run', 'calls', 'errors'], latencyRows));
  console.log('\nPer window (all classes):\n');
  console.log(table(['seconds', 'calls', 'p50 ms', 'p95 ms', 'p99 ms', 'errors'], perWindow));
  console.log(
    `\nReconciliation: ${chargedSeen} calls answered charged (${creditsCharged} credits standing), ${refundedAfterAnswer} of them refunded after the answer (a followed job that failed), ${refundedBeforeAnswer} charged and refunded before the answer; ${ledger.filter((entry) => entry.kind === 'charge').length} charges and ${ledger.filter((entry) => entry.kind === 'refund').length} refunds in the ledger; balances of ${balances.length} users equal their ledgers' sums: ${problems.length === 0 ? 'RECONCILED' : `FAILED (${problems.length} problems)`}`,
  );
  for (const problem of problems.slice(0, 20)) console.log(`  ${problem}`);
  exitCode = problems.length === 0 ? 0 : 1;
} catch (error) {
  console.error(error);
  if (platform) console.error(platform.output().slice(-3000));
} finally {
  await platform?.stop();
  await dropDatabase(databaseUrl).catch(() => undefined);
  await infra.stop();
}
process.exit(exitCode);
