/**
 * What the fault suites share: the platform as `npm start` runs it on a PostgreSQL and a Redis of their
 * own (the suites stop and kill them), users with credits, a load of mixed calls that records every
 * answer, the ledger's invariants read straight from the database, and a service or worker run as its
 * own process for the suites that kill it.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { startPostgres, startRedis } from '../../scripts/infra.ts';
import type { ServiceName } from '../../services/kit/src/runtime/config.ts';
import { type Platform, serviceListening, startPlatform } from '../support/platform.ts';
import { waitFor } from '../support/wait.ts';

export const ADMIN = { 'X-Admin-Key': 'dev-admin-key' };
export const SERVICE = { 'X-Service-Key': 'dev-service-key' };

/** `FAULTS_LONG=1`: longer outages and more load (the release run); the default keeps `npm test` bounded. */
export const LONG = process.env.FAULTS_LONG === '1';

export interface FaultPlatform {
  platform: Platform;
  postgres: Awaited<ReturnType<typeof startPostgres>>;
  redis: Awaited<ReturnType<typeof startRedis>>;
  /** A client on the platform's database (reconnected by `query` after an outage). */
  query<T = any>(sql: string, values?: unknown[]): Promise<T[]>;
  stop(): Promise<void>;
}

export async function startFaultPlatform(env: NodeJS.ProcessEnv = {}): Promise<FaultPlatform> {
  // Durable: an immediate stop must lose no acknowledged commit, or a run a client was given could vanish.
  const postgres = await startPostgres({ durable: true });
  const redis = await startRedis().catch(async (error: unknown) => {
    await postgres.stop();
    throw error;
  });
  let platform: Platform;
  try {
    // No seed: the faults do not need the history, and seeding is most of a start's minute.
    platform = await startPlatform({ shared: { databaseUrl: postgres.url, redisUrl: redis.url }, env: { GRAPH_SEED: 'false', ...env } });
  } catch (error) {
    await redis.stop();
    await postgres.stop();
    throw error;
  }
  return {
    platform,
    postgres,
    redis,
    async query(sql, values) {
      const client = new pg.Client({ connectionString: postgres.url });
      await client.connect();
      try {
        return (await client.query(sql, values as unknown[])).rows;
      } finally {
        await client.end();
      }
    },
    async stop() {
      await platform.stop();
      await redis.stop().catch(() => undefined);
      // Left down by a failed test: started so that it can be stopped and removed.
      await postgres.up().catch(() => undefined);
      await postgres.stop();
    },
  };
}

export interface Answer {
  name: string;
  status: number;
  retryAfter: string | null;
  ms: number;
  at: number;
  body: any;
  headers: Headers;
}

/** One call, timed; a transport failure or a call over `timeoutMs` is status 0 (a hang or a cut connection). */
export async function call(name: string, url: string, init: RequestInit = {}, timeoutMs = 15_000): Promise<Answer> {
  const started = Date.now();
  try {
    const response = await fetch(url, { ...init, signal: AbortSignal.timeout(timeoutMs) });
    const text = await response.text();
    let body: unknown = text;
    if ((response.headers.get('content-type') ?? '').includes('json') && text) body = JSON.parse(text);
    return {
      name,
      status: response.status,
      retryAfter: response.headers.get('retry-after'),
      ms: Date.now() - started,
      at: started,
      body,
      headers: response.headers,
    };
  } catch (error) {
    return { name, status: 0, retryAfter: null, ms: Date.now() - started, at: started, body: String(error), headers: new Headers() };
  }
}

export const json = (headers: Record<string, string>, body: unknown): RequestInit => ({
  method: 'POST',
  headers: { ...headers, 'content-type': 'application/json' },
  body: JSON.stringify(body),
});

/** A signed-in user of `tier` with `credits` granted on top of the demo grant; its Authorization header and id. */
export async function user(gateway: string, tier: 'free' | 'pro' | 'enterprise', credits = 0): Promise<{ id: string; auth: Record<string, string> }> {
  const signIn = await call('demo', `${gateway}/api/v1/auth/demo`, json({}, {}));
  assert.equal(signIn.status, 201, JSON.stringify(signIn.body));
  const auth = { authorization: `Bearer ${signIn.body.access_token}` };
  const me = await call('me', `${gateway}/api/v1/auth/me`, { headers: auth });
  const id = me.body.id as string;
  if (tier !== 'free') {
    const set = await call('tier', `${gateway}/api/v1/users/${id}/tier`, {
      method: 'PUT',
      headers: { ...ADMIN, 'content-type': 'application/json' },
      body: JSON.stringify({ tier }),
    });
    assert.equal(set.status, 200, JSON.stringify(set.body));
  }
  if (credits > 0) {
    const grant = await call(
      'grant',
      `${gateway}/api/v1/credits/admin/grant`,
      json(ADMIN, { user_id: id, amount: credits, idempotency_key: `faults-${id}`, reason: 'fault tests' }),
    );
    assert.equal(grant.status, 201, JSON.stringify(grant.body));
  }
  return { id, auth };
}

/** Runs `calls` round-robin from `concurrency` loops until `until` resolves; every answer, in order of start. */
export async function load(concurrency: number, calls: Array<() => Promise<Answer>>, until: Promise<unknown>): Promise<Answer[]> {
  const answers: Answer[] = [];
  let done = false;
  void until.finally(() => (done = true));
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (!done) answers.push(await calls[next++ % calls.length]!());
    }),
  );
  return answers.sort((a, b) => a.at - b.at);
}

/** Answers a client must never get, whatever the fault: a 500, a hang or cut connection, a 503 without Retry-After. */
export function unclean(answers: Answer[]): Answer[] {
  return answers.filter((answer) => answer.status === 0 || answer.status === 500 || (answer.status === 503 && !answer.retryAfter));
}

export const describeAnswers = (answers: Answer[]) =>
  answers
    .slice(0, 8)
    .map((answer) => `${answer.name} ${answer.status} after ${answer.ms} ms: ${JSON.stringify(answer.body).slice(0, 300)}`)
    .join('\n');

/** Counts by name and status, for messages and the docs' figures. */
export function tally(answers: Answer[]): Record<string, Record<number, number>> {
  const counts: Record<string, Record<number, number>> = {};
  for (const answer of answers) {
    counts[answer.name] ??= {};
    counts[answer.name]![answer.status] = (counts[answer.name]![answer.status] ?? 0) + 1;
  }
  return counts;
}

/** Milliseconds until `probe` answers 2xx, polling every 100 ms, or Infinity after `limitMs`. */
export async function timeUntilServing(probe: () => Promise<Answer>, limitMs: number): Promise<number> {
  const started = Date.now();
  const serving = async () => {
    const { status } = await probe();
    return status >= 200 && status < 300;
  };
  return waitFor('a 2xx', serving, { timeoutMs: limitMs, intervalMs: 100 }).then(
    () => Date.now() - started,
    () => Infinity,
  );
}

/**
 * The ledger's invariants for `userId`: the balance is the sum of its entries and the last entry's
 * balance_after, and no charge is refunded twice.
 */
export async function assertLedger(faults: FaultPlatform, userId: string): Promise<{ charges: any[]; refunds: any[] }> {
  const [account] = await faults.query<{ balance: string }>('select balance from users where id = $1', [userId]);
  const entries = await faults.query<{
    id: string;
    amount: string;
    balance_after: string;
    kind: string;
    operation: string | null;
    idempotency_key: string;
    refund_of: string | null;
  }>('select * from credit_ledger where user_id = $1 order by id', [userId]);
  const sum = entries.reduce((total, entry) => total + Number(entry.amount), 0);
  assert.equal(Number(account!.balance), sum, 'the balance is the sum of the ledger');
  assert.equal(Number(entries.at(-1)!.balance_after), sum, "the last entry's balance_after is the balance");
  const refunds = entries.filter((entry) => entry.kind === 'refund');
  assert.equal(new Set(refunds.map((refund) => refund.refund_of)).size, refunds.length, 'no charge refunded twice');
  return { charges: entries.filter((entry) => entry.kind === 'charge'), refunds };
}

/** Every service's /health, until each answers 200: the slowest one's milliseconds. */
export async function allHealthy(urls: Record<ServiceName, string>, limitMs: number): Promise<Record<string, number>> {
  const times = await Promise.all(
    Object.entries(urls).map(async ([service, url]) => [service, await timeUntilServing(() => call(service, `${url}/health`, {}, 2_000), limitMs)] as const),
  );
  return Object.fromEntries(times);
}

/** `wait`, its failure told with the tail of the processes' output (what a timed-out wait alone does not say). */
export function telling<T>(wait: Promise<T>, output: () => string | Promise<string>): Promise<T> {
  return wait.catch(async (error: Error) => {
    throw new Error(`${error.message}:\n${await output()}`);
  });
}

const root = fileURLToPath(new URL('../..', import.meta.url));

/** A service or worker as its own process (as a pod runs it), its output kept; killed with SIGKILL by the test. */
export class Proc {
  readonly child: ChildProcess;
  output = '';
  constructor(script: string, env: NodeJS.ProcessEnv, args: string[] = []) {
    this.child = spawn(process.execPath, [script, ...args], {
      cwd: root,
      env: { ...process.env, LOG_LEVEL: 'info', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.child.stdout!.on('data', (chunk) => (this.output += chunk));
    this.child.stderr!.on('data', (chunk) => (this.output += chunk));
  }

  /**
   * Waits for the service's "listening" line (failing at once if the process exits first): the URL it
   * bound. Started on PORT 0, the service binds a port of its own at once; none is picked and bound later.
   */
  async listening(service: ServiceName, timeoutMs: number): Promise<string> {
    const listened = () => this.output.split('\n').map(serviceListening(service)).find(Boolean)?.url;
    const seen = await telling(
      waitFor(`${service}'s listening line`, () => listened() ?? (this.child.exitCode !== null && { exited: this.child.exitCode }), {
        timeoutMs,
      }),
      () => this.output.slice(-3000),
    );
    if (typeof seen !== 'string') throw new Error(`exited (${seen.exited}) before it listened:\n${this.output.slice(-3000)}`);
    return seen;
  }

  async kill(signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    const exited = new Promise((resolve) => this.child.once('exit', resolve));
    this.child.kill(signal);
    await exited;
  }
}
