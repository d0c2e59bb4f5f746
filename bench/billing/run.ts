/**
 * Billing benchmark: `npm run bench:billing`
 *
 * Verified webhooks per second, end to end: the gateway and billing run as their own processes on
 * PostgreSQL; BENCH_EVENTS Stripe `checkout.session.completed` events (each a different pack payment,
 * spread over BENCH_USERS users) are signed as Stripe signs them and POSTed to billing's webhook,
 * BENCH_CONCURRENCY at a time, and a share of them (BENCH_REDELIVER, default 0.2) delivered a second time
 * concurrently, as Stripe does after a lost answer. Timed: from the first request until every grant is in
 * the gateway's ledger. Checked after the run: each user's balance and ledger hold each payment exactly
 * once, and billing's outbox is empty.
 *
 * Beside it, the ceiling the verification alone sets: the stripe package's constructEvent on one core.
 * Uses DATABASE_URL when set, otherwise starts PostgreSQL like `npm test`.
 */
import type { ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import Stripe from 'stripe';
import { Agent, request as undiciRequest } from 'undici';
import { startInfra } from '../../scripts/infra.ts';
import { createDatabase, dropDatabase } from '../../test/support/database.ts';
import { request } from '../../test/support/http.ts';
import { end, launch, serviceListening, shownAt } from '../../test/support/platform.ts';
import { signatureFor, stripeEvent } from '../../test/support/stand-ins/stripe.ts';

const EVENTS = Number(process.env.BENCH_EVENTS ?? 2000);
const USERS = Number(process.env.BENCH_USERS ?? 200);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 32);
const REDELIVER = Number(process.env.BENCH_REDELIVER ?? 0.2);
const GATEWAY_KEY = 'bench-gateway-key-0123456789';
const BILLING_KEY = 'bench-billing-key-0123456789';
const SECRET = 'whsec_bench_0123456789';
const PACK_CREDITS = 100;
const step = (message: string) => process.stderr.write(`[bench] ${message}\n`);
const percentile = (values: number[], p: number) => [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.floor(values.length * p))]!;

const infra = process.env.DATABASE_URL ? undefined : await startInfra();
if (infra) Object.assign(process.env, infra.env);

/** User plus system CPU seconds of a process so far (Linux). */
function cpuSeconds(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/** A service on a port of its own at once (port 0): its "listening" line (info) says which; only warnings are printed. */
async function start(service: 'gateway' | 'billing', env: Record<string, string>): Promise<{ child: ChildProcess; url: string }> {
  const script = fileURLToPath(new URL(`../../services/${service}/src/main.ts`, import.meta.url));
  const base = { ...process.env, REDIS_URL: '', HOST: '127.0.0.1', PORT: '0', METRICS_PORT: '0', LOG_LEVEL: 'info', OTEL_SDK_DISABLED: 'true' };
  const { child, announced } = launch(
    script,
    [],
    { ...base, ...env },
    serviceListening(service),
    shownAt('warn', (line) => console.log(line)),
  );
  children.push(child);
  return { child, url: (await announced).url };
}

async function healthy(base: string): Promise<void> {
  for (let attempt = 0; ; attempt += 1) {
    if ((await request(base, '/health').catch(() => ({ status: 0 }))).status === 200) return;
    if (attempt > 600) throw new Error(`${base} did not start`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

const [gatewayDb, billingDb] = await Promise.all([createDatabase('benchgw'), createDatabase('benchbilling')]);
const children: ChildProcess[] = [];
const ledgerDb = new pg.Client({ connectionString: gatewayDb });

try {
  // Billing books into the gateway's ledger, so the gateway starts first; the events are POSTed to billing
  // itself, so the gateway proxies nothing to billing and is not told where it listens.
  const { child: gateway, url: gatewayUrl } = await start('gateway', {
    DATABASE_URL: gatewayDb,
    SERVICE_KEY: GATEWAY_KEY,
    SIGNUP_CREDITS: '0',
    RATE_LIMIT_MULTIPLIER: '1000',
    TEMPORA_DATA_DIR: `/tmp/bench-billing-${process.pid}`,
  });
  const { child: billing, url: billingUrl } = await start('billing', {
    DATABASE_URL: billingDb,
    SERVICE_KEY: BILLING_KEY,
    GATEWAY_URL: gatewayUrl,
    GATEWAY_SERVICE_KEY: GATEWAY_KEY,
    STRIPE_WEBHOOK_SECRET: SECRET,
  });
  await Promise.all([healthy(gatewayUrl), healthy(billingUrl)]);
  await ledgerDb.connect();
  const users: string[] = [];
  for (let i = 0; i < USERS; i += 1) {
    const reply = await request(gatewayUrl, '/api/v1/users/resolve', {
      method: 'POST',
      headers: { 'X-Service-Key': GATEWAY_KEY },
      body: { external_id: `bench-${randomUUID()}` },
    });
    users.push(reply.body.user.id);
  }
  step(`${USERS} users; ${EVENTS} events, ${Math.round(EVENTS * REDELIVER)} of them delivered twice, ${CONCURRENCY} at a time`);

  const paymentsOf = new Map<string, number>();
  const deliveries: { event: object; user: string }[] = [];
  for (let i = 0; i < EVENTS; i += 1) {
    const user = users[i % USERS]!;
    paymentsOf.set(user, (paymentsOf.get(user) ?? 0) + 1);
    const event = stripeEvent('checkout.session.completed', {
      id: `cs_bench_${i}_${randomUUID().slice(0, 8)}`,
      object: 'checkout.session',
      mode: 'payment',
      status: 'complete',
      payment_status: 'paid',
      payment_intent: `pi_bench_${i}_${randomUUID().slice(0, 8)}`,
      client_reference_id: user,
      metadata: { user_id: user, pack_id: 'starter' },
      amount_total: 499,
      currency: 'usd',
    });
    deliveries.push({ event, user });
    if (i < EVENTS * REDELIVER) deliveries.push({ event, user });
  }
  // Redeliveries land among the first deliveries, often concurrently with them.
  for (let i = deliveries.length - 1; i > 0; i -= 1) {
    const j = Math.max(0, i - Math.floor(Math.random() * CONCURRENCY * 2));
    [deliveries[i], deliveries[j]] = [deliveries[j]!, deliveries[i]!];
  }

  const agent = new Agent({ connections: CONCURRENCY, pipelining: 1 });
  const latencies: number[] = [];
  const outcomes = new Map<string, number>();
  const grantsInLedger = async () =>
    Number((await ledgerDb.query(`select count(*) from credit_ledger where idempotency_key like 'service-grant:stripe:purchase:pi_bench_%'`)).rows[0].count);

  const cpuBefore = { gateway: cpuSeconds(gateway.pid!), billing: cpuSeconds(billing.pid!) };
  const started = performance.now();
  let next = 0;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < deliveries.length) {
        const { event } = deliveries[next++]!;
        const payload = JSON.stringify(event, null, 2);
        const sent = performance.now();
        const reply = await undiciRequest(`${billingUrl}/api/v1/billing/webhooks/stripe`, {
          method: 'POST',
          dispatcher: agent,
          headers: { 'content-type': 'application/json; charset=utf-8', 'stripe-signature': signatureFor(payload, [SECRET]) },
          body: payload,
        });
        const body = (await reply.body.json()) as { outcome?: string };
        latencies.push(performance.now() - sent);
        if (reply.statusCode !== 200) throw new Error(`webhook answered ${reply.statusCode}: ${JSON.stringify(body)}`);
        outcomes.set(body.outcome!, (outcomes.get(body.outcome!) ?? 0) + 1);
      }
    }),
  );
  const answered = (performance.now() - started) / 1000;
  while ((await grantsInLedger()) < EVENTS) {
    if (performance.now() - started > 600_000) throw new Error('the ledger did not receive every grant within 10 minutes');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  const booked = (performance.now() - started) / 1000;
  const cpu = { gateway: cpuSeconds(gateway.pid!) - cpuBefore.gateway, billing: cpuSeconds(billing.pid!) - cpuBefore.billing };
  await agent.close();

  // Exactly once: every payment granted once, nothing twice, nothing left behind.
  const balances = await ledgerDb.query<{ id: string; balance: string }>('select id, balance from users');
  let wrong = 0;
  for (const row of balances.rows) if (Number(row.balance) !== (paymentsOf.get(row.id) ?? 0) * PACK_CREDITS) wrong += 1;
  const duplicates = Number(
    (await ledgerDb.query(`select count(*) from (select idempotency_key from credit_ledger group by user_id, idempotency_key having count(*) > 1) d`)).rows[0]
      .count,
  );
  const entries = await grantsInLedger();
  const health = await request(billingUrl, '/health');
  if (wrong > 0 || duplicates > 0 || entries !== EVENTS || health.body.outbox.pending !== 0 || outcomes.get('applied') !== EVENTS) {
    throw new Error(
      `exactly-once violated: ${wrong} wrong balances, ${duplicates} duplicated keys, ${entries} grants for ${EVENTS} payments, outbox ${JSON.stringify(health.body.outbox)}, outcomes ${JSON.stringify([...outcomes])}`,
    );
  }

  // The ceiling the verification alone sets.
  const sample = JSON.stringify(deliveries[0]!.event, null, 2);
  const header = signatureFor(sample, [SECRET]);
  const rounds = 20_000;
  const verifyStarted = performance.now();
  for (let i = 0; i < rounds; i += 1) Stripe.webhooks.constructEvent(sample, header, SECRET);
  const verifyPerSecond = rounds / ((performance.now() - verifyStarted) / 1000);

  const requests = deliveries.length;
  console.log(
    `\nBilling: Stripe webhooks end to end into the gateway's ledger (${EVENTS} payments over ${USERS} users, ${requests - EVENTS} redeliveries, ${CONCURRENCY} concurrent)`,
  );
  console.log('| measure | value |');
  console.log('|---|---|');
  console.log(`| webhooks answered | ${requests} in ${answered.toFixed(2)} s: ${(requests / answered).toFixed(0)}/s |`);
  console.log(`| payments in the gateway's ledger | ${EVENTS} in ${booked.toFixed(2)} s: ${(EVENTS / booked).toFixed(0)}/s |`);
  console.log(`| webhook latency p50, p99 | ${percentile(latencies, 0.5).toFixed(1)} ms, ${percentile(latencies, 0.99).toFixed(1)} ms |`);
  console.log(`| outcomes | ${[...outcomes].map(([outcome, count]) => `${outcome} ${count}`).join(', ')} |`);
  console.log(`| CPU per payment (billing, gateway) | ${((cpu.billing / EVENTS) * 1000).toFixed(2)} ms, ${((cpu.gateway / EVENTS) * 1000).toFixed(2)} ms |`);
  console.log(`| exactly once | ${USERS} balances right, ${entries} grants for ${EVENTS} payments, 0 keys twice, outbox empty |`);
  console.log(`| ceiling: constructEvent alone, one core | ${verifyPerSecond.toFixed(0)}/s |`);
} finally {
  await ledgerDb.end().catch(() => undefined);
  for (const child of children.reverse()) await end(child);
  await Promise.all([dropDatabase(gatewayDb), dropDatabase(billingDb)]);
  await infra?.stop();
}
