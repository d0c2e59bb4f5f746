import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { createDatabase, dropDatabase } from '../support/database.ts';
import { paidPackSession, type StripeEvent, signatureFor, stripeEvent } from '../support/stand-ins/stripe.ts';
import { waitFor } from '../support/wait.ts';
import { call, Proc, telling } from './support.ts';

const GATEWAY_KEY = 'faults-gateway-service-key';
const BILLING_KEY = 'faults-billing-service-key';
const ADMIN_KEY = 'faults-admin-key';
const WEBHOOK_SECRET = 'whsec_faults_billing_killed_0123456789';
const STRIPE_WEBHOOK = '/api/v1/billing/webhooks/stripe';
/** The default catalogue's starter pack: what every purchase here buys. */
const PACK_CREDITS = 100;
/** Billing's time-out on a gateway call; its outbox leases an entry for this and 5 s more. */
const GATEWAY_TIMEOUT_MS = 3_000;
const LEASE_MS = GATEWAY_TIMEOUT_MS + 5_000;

/** One statement on a database of the test server (its own connection). */
async function query<T = any>(url: string, sql: string, values: unknown[] = []): Promise<T[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query(sql, values)).rows as T[];
  } finally {
    await client.end();
  }
}

interface Forwarded {
  key: string;
  status: number;
  replayed: boolean;
  /** The answer was kept from billing (the connection is left hanging until billing goes). */
  held: boolean;
}

/**
 * What billing calls as its gateway: every request is forwarded to the real gateway and its answer passed
 * back, except that while `hold` is set a grant's answer is kept once the gateway has given it: the
 * gateway booked, and billing never hears so.
 */
class PassThrough {
  hold = false;
  readonly grants: Forwarded[] = [];
  /** The gateway's URL: set once the gateway is up, which is started after billing (it is given billing's URL). */
  target = '';
  private server: Server | undefined;
  private readonly held: ServerResponse[] = [];
  url = '';

  async start(): Promise<void> {
    this.server = createServer((req, res) => void this.forward(req, res));
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as { port: number }).port}`;
  }

  private async forward(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = Buffer.concat(chunks);
    const headers: Record<string, string> = {};
    for (const [name, value] of Object.entries(req.headers))
      if (typeof value === 'string' && !['host', 'connection', 'content-length'].includes(name)) headers[name] = value;
    let status: number;
    let text: string;
    let type: string;
    try {
      const response = await fetch(`${this.target}${req.url}`, { method: req.method, headers, body: body.length > 0 ? body : undefined });
      [status, text, type] = [response.status, await response.text(), response.headers.get('content-type') ?? 'application/json'];
    } catch (error) {
      res.writeHead(502, { 'content-type': 'text/plain' }).end(String(error));
      return;
    }
    if (req.method === 'POST' && req.url === '/api/v1/credits/grant') {
      const held = this.hold;
      let replayed = false;
      try {
        replayed = (JSON.parse(text) as { replayed?: boolean }).replayed === true;
      } catch {
        // a problem document: not replayed
      }
      this.grants.push({ key: (JSON.parse(body.toString()) as { idempotency_key: string }).idempotency_key, status, replayed, held });
      if (held) {
        this.held.push(res);
        return;
      }
    }
    res.writeHead(status, { 'content-type': type }).end(text);
  }

  async stop(): Promise<void> {
    for (const res of this.held.splice(0)) res.destroy();
    this.server?.closeAllConnections();
    await new Promise((resolve) => this.server?.close(resolve) ?? resolve(undefined));
  }
}

/**
 * The billing service killed with SIGKILL while it holds a webhook's work, as its own process (as a pod
 * runs it) against a real gateway process, each on a fresh database of the test PostgreSQL. The test
 * plays Stripe: it signs each event with the endpoint's secret and delivers it again, as Stripe does,
 * until it is answered 2xx. Wherever billing dies, the pack's credits reach the ledger exactly once.
 */
describe('faults: billing killed (SIGKILL) while it applies a webhook', function () {
  this.timeout(60_000);
  const procs: Proc[] = [];
  const proxy = new PassThrough();
  let gatewayDb: string;
  let billingDb: string;
  let dataDir: string;
  let gateway: Proc;
  let gatewayUrl: string;
  let billingUrl: string;
  let billing: Proc;

  const start = (script: string, env: NodeJS.ProcessEnv) => {
    const proc = new Proc(script, env);
    procs.push(proc);
    return proc;
  };

  /**
   * A billing process on the database of the one before it (a pod restarted). The first binds a port at
   * once (PORT 0); a restarted one binds the same port again, as a pod restarts behind its Service's one
   * address: Stripe's webhook endpoint and the gateway's BILLING_URL do not change with the process.
   */
  const startBilling = async (): Promise<{ proc: Proc; ms: number }> => {
    const started = Date.now();
    const proc = start('services/billing/src/main.ts', {
      PORT: billingUrl ? new URL(billingUrl).port : '0',
      METRICS_PORT: '0',
      HOST: '127.0.0.1',
      DATABASE_URL: billingDb,
      TEMPORA_DATA_DIR: dataDir,
      SERVICE_KEY: BILLING_KEY,
      ADMIN_KEY,
      GATEWAY_URL: proxy.url,
      GATEWAY_SERVICE_KEY: GATEWAY_KEY,
      GATEWAY_TIMEOUT_MS: String(GATEWAY_TIMEOUT_MS),
      STRIPE_WEBHOOK_SECRET: WEBHOOK_SECRET,
      STRIPE_SECRET_KEY: '',
      OUTBOX_POLL_MS: '200',
      OUTBOX_RETRY_MAX_MS: '1000',
      OTEL_SDK_DISABLED: 'true',
    });
    billingUrl = await proc.listening('billing', 60_000);
    return { proc, ms: Date.now() - started };
  };

  /** One delivery of `event` as Stripe makes it: the same body, signed at the time of sending. */
  const deliver = (event: StripeEvent, timeoutMs = 30_000) => {
    const payload = JSON.stringify(event, null, 2);
    return call(
      'stripe webhook',
      `${billingUrl}${STRIPE_WEBHOOK}`,
      {
        method: 'POST',
        headers: { 'content-type': 'application/json; charset=utf-8', 'stripe-signature': signatureFor(payload, [WEBHOOK_SECRET]) },
        body: payload,
      },
      timeoutMs,
    );
  };

  /** A new gateway user with no credits; its id. */
  const newUser = async (): Promise<string> => {
    const reply = await call('resolve', `${gatewayUrl}/api/v1/users/resolve`, {
      method: 'POST',
      headers: { 'X-Service-Key': GATEWAY_KEY, 'content-type': 'application/json' },
      body: JSON.stringify({ external_id: `buyer-${randomUUID()}` }),
    });
    assert.equal(reply.status, 201, JSON.stringify(reply.body));
    return reply.body.user.id as string;
  };

  /** The user's gateway ledger, oldest first, and balance. */
  const ledger = async (userId: string) => {
    const entries = await query<{ amount: string; kind: string; operation: string | null; idempotency_key: string; balance_after: string }>(
      gatewayDb,
      'select amount, kind, operation, idempotency_key, balance_after from credit_ledger where user_id = $1 order by id',
      [userId],
    );
    const [account] = await query<{ balance: string }>(gatewayDb, 'select balance from users where id = $1', [userId]);
    return { entries: entries.map((entry) => ({ ...entry, amount: Number(entry.amount) })), balance: Number(account!.balance) };
  };

  const outboxOf = (userId: string) =>
    query<{ id: string; status: string; attempts: number; idempotency_key: string; amount: number; delivered_at: Date | null }>(
      billingDb,
      'select * from billing_outbox where user_id = $1 order by id',
      [userId],
    );

  /** The ledger holds the one grant of the pack, under billing's key for the payment; nothing else. */
  const assertGrantedOnce = async (userId: string, paymentIntent: string) => {
    const { entries, balance } = await ledger(userId);
    assert.deepEqual(
      entries.map((entry) => [entry.kind, entry.amount, entry.operation, entry.idempotency_key]),
      [['grant', PACK_CREDITS, 'billing.pack', `service-grant:stripe:purchase:${paymentIntent}`]],
      'exactly one grant of the pack in the gateway ledger',
    );
    assert.equal(balance, PACK_CREDITS);
    const outbox = await outboxOf(userId);
    assert.equal(outbox.length, 1, 'one outbox entry for the payment');
    assert.equal(outbox[0]!.status, 'delivered');
    return outbox[0]!;
  };

  const output = () => procs.map((proc) => proc.output.slice(-1500)).join('\n---\n');

  before(async function () {
    this.timeout(180_000);
    [gatewayDb, billingDb] = await Promise.all([createDatabase('faults_billing_gw'), createDatabase('faults_billing')]);
    dataDir = mkdtempSync(join(tmpdir(), 'faults-billing-'));
    await proxy.start();
    billing = (await startBilling()).proc;
    gateway = start('services/gateway/src/main.ts', {
      PORT: '0',
      METRICS_PORT: '0',
      HOST: '127.0.0.1',
      DATABASE_URL: gatewayDb,
      REDIS_URL: process.env.REDIS_URL,
      REDIS_KEY_PREFIX: `faults-${randomBytes(4).toString('hex')}`,
      TEMPORA_DATA_DIR: dataDir,
      SERVICE_KEY: GATEWAY_KEY,
      ADMIN_KEY,
      BILLING_URL: billingUrl,
      BILLING_SERVICE_KEY: BILLING_KEY,
      SIGNUP_CREDITS: '0',
      RATE_LIMIT_MULTIPLIER: '1000',
      OTEL_SDK_DISABLED: 'true',
    });
    gatewayUrl = await gateway.listening('gateway', 120_000);
    proxy.target = gatewayUrl;
  });

  after(async function () {
    this.timeout(60_000);
    for (const proc of procs.splice(0)) await proc.kill('SIGTERM');
    await proxy.stop();
    await Promise.all([gatewayDb && dropDatabase(gatewayDb), billingDb && dropDatabase(billingDb)]);
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });

  it('killed with its grant call in flight, after the gateway booked and before billing heard: the next process delivers again under the same key, the gateway replays, one grant', async () => {
    const userId = await newUser();
    const session = paidPackSession(userId);
    const event = stripeEvent('checkout.session.completed', session);

    // Stripe's first delivery: billing commits the payment and its outbox entry, then calls the gateway,
    // which books the grant; its answer is kept from billing.
    proxy.hold = true;
    const first = deliver(event);
    await telling(
      waitFor('a grant to reach the gateway', () => proxy.grants.length > 0, { timeoutMs: 30_000 }),
      output,
    );
    assert.equal((await ledger(userId)).entries.length, 1, 'the gateway booked the grant before billing was killed');
    assert.equal(proxy.grants.length, 1);
    assert.ok(proxy.grants[0]!.held && proxy.grants[0]!.status === 201 && !proxy.grants[0]!.replayed, JSON.stringify(proxy.grants));

    await billing.kill('SIGKILL');
    const killedAt = Date.now();
    proxy.hold = false;
    const answered = await first;
    assert.equal(answered.status, 0, `Stripe got no answer from the killed process, so it delivers again: ${JSON.stringify(answered.body)}`);
    const [entry] = await outboxOf(userId);
    assert.equal(entry?.status, 'pending', 'the grant is still owed in the outbox (billing never heard it was booked)');

    // Kubernetes starts the pod again; Stripe delivers again and is told the event was recorded.
    const restarted = await startBilling();
    billing = restarted.proc;
    const again = await deliver(event);
    assert.equal(again.status, 200, JSON.stringify(again.body));
    assert.equal(again.body.outcome, 'duplicate');

    // The new process's outbox delivers the entry again, under the same key: the gateway answers it as a replay.
    const delivered = async () => (await outboxOf(userId))[0]?.status === 'delivered';
    await telling(
      waitFor('the outbox entry delivered', delivered, { timeoutMs: 40_000 - (Date.now() - killedAt) }),
      async () => `${JSON.stringify(await outboxOf(userId))}\n${output()}`,
    );
    const deliveredMs = Date.now() - killedAt;
    const row = await assertGrantedOnce(userId, session.payment_intent);
    assert.equal(row.attempts, 2, 'leased twice: once by each process');
    assert.equal(proxy.grants.length, 2, `the grant was sent twice, the second time by the new process: ${JSON.stringify(proxy.grants)}`);
    assert.equal(proxy.grants[1]!.key, proxy.grants[0]!.key, 'under the same idempotency key');
    assert.deepEqual([proxy.grants[1]!.status, proxy.grants[1]!.replayed], [200, true], 'answered by the gateway as a replay');

    // Stripe's later copies change nothing: a grant they wrongly owed would be sent within a few outbox
    // polls (every 200 ms), so a window of time is let pass before the ledger is read.
    assert.equal((await deliver(event)).body.outcome, 'duplicate');
    await sleep(500);
    await assertGrantedOnce(userId, session.payment_intent);
    assert.equal(proxy.grants.length, 2);
    process.stderr.write(
      `      [faults] billing killed with its grant call in flight (gateway booked, answer lost): new process up in ${restarted.ms} ms, grant delivered again under the same key ${deliveredMs} ms after the kill, gateway replayed it: 1 ledger entry of ${PACK_CREDITS} (the dead process's lease: ${LEASE_MS / 1000} s)\n`,
    );
  });

  it("killed inside the webhook's database transaction: nothing of it is kept, Stripe's next delivery to the next process applies it once, one grant; a delivery after that is a duplicate", async () => {
    const userId = await newUser();
    const session = paidPackSession(userId);
    const event = stripeEvent('checkout.session.completed', session);
    const databaseName = new URL(billingDb).pathname.slice(1);

    // The test holds billing_history so that no transaction can write it: the webhook's transaction claims
    // the event, locks and updates the payment, then waits at its history line.
    const locker = new pg.Client({ connectionString: billingDb });
    await locker.connect();
    try {
      await locker.query('begin');
      await locker.query('lock table billing_history in share mode');
      const first = deliver(event);
      const blocked = async () =>
        (
          await query<{ pid: number }>(
            billingDb,
            `select pid from pg_stat_activity where datname = $1 and wait_event_type = 'Lock' and state = 'active' and query ilike '%insert into "billing_history"%'`,
            [databaseName],
          )
        )[0];
      const waiting = await telling(waitFor("the webhook's transaction to wait at billing_history", blocked, { timeoutMs: 30_000 }), output);
      const claimed = await query(billingDb, `select 1 from pg_locks where pid = $1 and locktype = 'transactionid' and granted`, [waiting.pid]);
      assert.equal(claimed.length, 1, 'the waiting transaction holds writes (the event claimed, the payment locked)');

      await billing.kill('SIGKILL');
      const killedAt = Date.now();
      const answered = await first;
      assert.equal(answered.status, 0, `Stripe got no answer from the killed process, so it delivers again: ${JSON.stringify(answered.body)}`);

      // The lock is let go: the dead process's transaction goes on to its next statement, finds its client
      // gone, and is rolled back.
      await locker.query('commit');
      const gone = async () => (await query(billingDb, 'select 1 from pg_stat_activity where pid = $1', [waiting.pid])).length === 0;
      await waitFor("the dead process's backend to end once the lock was released", gone, { timeoutMs: 15_000 - (Date.now() - killedAt) });
      assert.equal(
        (await query(billingDb, `select 1 from billing_events where provider = 'stripe' and event_id = $1`, [event.id])).length,
        0,
        'the event is not recorded',
      );
      assert.equal(
        (await query(billingDb, `select 1 from billing_payments where payment_intent = $1`, [session.payment_intent])).length,
        0,
        'the payment is not recorded',
      );
      assert.equal((await outboxOf(userId)).length, 0, 'nothing owed in the outbox');
      assert.equal((await ledger(userId)).entries.length, 0, 'nothing granted');

      // Stripe delivers again, to the restarted billing: applied, and the answer waits for the grant.
      const restarted = await startBilling();
      billing = restarted.proc;
      const again = await deliver(event);
      assert.equal(again.status, 200, JSON.stringify(again.body));
      assert.equal(again.body.outcome, 'applied');
      const granted = async () => (await ledger(userId)).entries.length > 0;
      await waitFor('the grant in the ledger', granted, { timeoutMs: 40_000 - (Date.now() - killedAt) });
      const grantedMs = Date.now() - killedAt;
      const row = await assertGrantedOnce(userId, session.payment_intent);
      assert.equal(row.attempts, 1);

      const duplicate = await deliver(event);
      assert.equal(duplicate.status, 200, JSON.stringify(duplicate.body));
      assert.equal(duplicate.body.outcome, 'duplicate');
      // As above: a window for a wrongly owed grant to be sent, then the ledger read.
      await sleep(500);
      await assertGrantedOnce(userId, session.payment_intent);
      process.stderr.write(
        `      [faults] billing killed inside a webhook's transaction (blocked on a lock): nothing kept; redelivered to the new process (up in ${restarted.ms} ms) and granted once ${grantedMs} ms after the kill; the next copy a duplicate\n`,
      );
    } finally {
      await locker.end().catch(() => undefined);
    }
  });
});
