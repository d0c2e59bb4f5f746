import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Database, type Knex, openDatabase } from '@tempora/kit/data';
import { type RunningServer, serve } from '@tempora/kit/http';
import { createLogger } from '@tempora/kit/observability';
import { loadConfig } from '@tempora/kit/runtime';
import { pino } from 'pino';
import { createDatabase, dropDatabase } from '../../../test/support/database.ts';
import { type Reply, request } from '../../../test/support/http.ts';
import { GatewayConfigSchema } from '../../gateway/src/config.ts';
import { createGatewayService, type GatewayInstance } from '../../gateway/src/service.ts';
import { BillingConfigSchema } from '../src/config.ts';
import { migrations } from '../src/migrations.ts';
import { type BillingInstance, createBillingService } from '../src/service.ts';
import { BUNDLE_ID, type Chain, makeChain, makeRoot, pemOf } from './apple-pki.ts';
import { type StripeStandIn, signatureFor, startStripeStandIn } from './stripe-server.ts';

export const SERVICE_KEY = 'billing-service-key-0123456789';
export const GATEWAY_KEY = 'gateway-service-key-0123456789';
export const ADMIN_KEY = 'billing-admin-key-0123456789';
export const STRIPE_KEY = 'sk_test_billing_0123456789';
export const WEBHOOK_SECRET = 'whsec_test_current_0123456789';
export const OLD_WEBHOOK_SECRET = 'whsec_test_previous_0123456789';
export const service = { 'X-Service-Key': SERVICE_KEY };
/** A user's request as the gateway forwards it: the service key and the user's id. */
export const asUser = (userId: string) => ({ 'X-Service-Key': SERVICE_KEY, 'X-User-ID': userId });
export const STRIPE_WEBHOOK = '/api/v1/billing/webhooks/stripe';
export const APPLE_WEBHOOK = '/api/v1/billing/webhooks/apple';

export interface Gateway {
  url: string;
  instance: GatewayInstance;
  server: RunningServer;
}

export interface BillingHarness {
  billing: BillingInstance;
  /** The harness's own connection to billing's database, for the tests' look at the rows. */
  db: Knex;
  url: string;
  gateway: Gateway | undefined;
  gatewayUrl: string;
  /** Where billing's /metrics answers (METRICS_PORT). */
  metricsUrl: string;
  stripe: StripeStandIn;
  /** A chain under the root billing trusts, and the root itself (to issue further chains under it). */
  apple: Chain;
  appleRoot: Awaited<ReturnType<typeof makeRoot>>;
  call<T = any>(method: string, path: string, init?: { headers?: Record<string, string>; body?: unknown; raw?: string }): Promise<Reply<T>>;
  /** A new gateway user (no signup credits); its id. */
  user(): Promise<string>;
  balance(userId: string): Promise<number>;
  tier(userId: string): Promise<string>;
  /** The user's gateway ledger entries, oldest first. */
  ledger(userId: string): Promise<{ amount: number; kind: string; operation: string | null; idempotency_key: string }[]>;
  /** POSTs a Stripe event to billing signed as Stripe signs it (or with the given signature). */
  stripeEvent(event: object, options?: { secrets?: string[]; timestamp?: number; signature?: string; raw?: string }): Promise<Reply>;
  appleNotification(body: string): Promise<Reply>;
  postTransaction(userId: string, signed: string): Promise<Reply>;
  /** Waits until the outbox has delivered everything due (or fails after `ms`). */
  settled(ms?: number): Promise<void>;
  stopGateway(): Promise<void>;
  startGateway(): Promise<void>;
  stop(): Promise<void>;
}

async function startGatewayOn(port: number, database: string, dataDir: string, billingUrl: string, redisPrefix: string): Promise<Gateway> {
  const config = loadConfig(GatewayConfigSchema, {
    DATABASE_URL: database,
    REDIS_URL: process.env.REDIS_URL,
    REDIS_KEY_PREFIX: redisPrefix,
    TEMPORA_DATA_DIR: dataDir,
    SERVICE_KEY: GATEWAY_KEY,
    ADMIN_KEY,
    BILLING_SERVICE_KEY: SERVICE_KEY,
    BILLING_URL: billingUrl,
    SIGNUP_CREDITS: '0',
    RATE_LIMIT_MULTIPLIER: '1000',
    LOG_LEVEL: 'silent',
  });
  const instance = await createGatewayService(config, createLogger('gateway', 'silent'));
  const server = await serve(instance.app, {
    port,
    host: '127.0.0.1',
    logger: instance.logger,
    graceMs: 200,
    onDrain: instance.drain,
    onClose: [instance.close],
    express: instance.express,
  });
  return { url: server.url, instance, server };
}

/** Buys through the Stripe stand-in as a user would: checkout, then pay the session; its session and events. */
export async function buy(h: BillingHarness, userId: string, kind: 'pack' | 'plan', id: string) {
  const checkout = await h.call('POST', '/api/v1/billing/checkout', { headers: asUser(userId), body: { kind, id } });
  if (checkout.status !== 201) throw new Error(`checkout: ${checkout.status} ${JSON.stringify(checkout.body)}`);
  const events = await h.stripe.pay(checkout.body.id);
  return {
    session: checkout.body,
    events,
    subscriptionId: events.find((event) => event.type === 'customer.subscription.created')?.data.object.id as string | undefined,
  };
}

/** A suite's billing harness, started before its tests and stopped after them. */
export function useBilling(ready: (h: BillingHarness) => void, env: Record<string, string> = {}, options: { logs?: string[] } = {}): void {
  let h: BillingHarness | undefined;
  before(async () => {
    h = await startBilling(env, options);
    ready(h);
  });
  after(async () => {
    await h?.stop();
  });
}

/**
 * Billing in this process on a fresh database, with a real gateway (its own fresh database) for its
 * ledger and tiers, the Stripe stand-in for its API and webhooks, and a test Apple root it trusts.
 */
export async function startBilling(env: Record<string, string> = {}, options: { logs?: string[] } = {}): Promise<BillingHarness> {
  const appleRoot = await makeRoot();
  const [billingDb, gatewayDb, apple] = await Promise.all([createDatabase('billing'), createDatabase('billing_gw'), makeChain({ root: appleRoot })]);
  const dataDir = mkdtempSync(join(tmpdir(), 'billing-test-'));
  const redisPrefix = `test-${randomBytes(4).toString('hex')}`;
  const stripe = await startStripeStandIn({ webhookSecrets: [WEBHOOK_SECRET], secretKey: STRIPE_KEY, attempts: 1 });

  // The gateway's port is fixed before billing starts, so a stopped gateway comes back where billing calls it.
  let gateway: Gateway | undefined = await startGatewayOn(0, gatewayDb, dataDir, 'http://127.0.0.1:1', redisPrefix);
  const gatewayPort = Number(new URL(gateway.url).port);
  const config = loadConfig(BillingConfigSchema, {
    DATABASE_URL: billingDb,
    SERVICE_KEY,
    ADMIN_KEY,
    GATEWAY_URL: gateway.url,
    GATEWAY_SERVICE_KEY: GATEWAY_KEY,
    GATEWAY_TIMEOUT_MS: '2000',
    STRIPE_SECRET_KEY: STRIPE_KEY,
    STRIPE_API_URL: stripe.url,
    STRIPE_WEBHOOK_SECRET: `${WEBHOOK_SECRET},${OLD_WEBHOOK_SECRET}`,
    CHECKOUT_SUCCESS_URL: 'http://127.0.0.1:9/done?session={CHECKOUT_SESSION_ID}',
    CHECKOUT_CANCEL_URL: 'http://127.0.0.1:9/cancelled',
    APPLE_ROOT_CERTIFICATES: pemOf(apple.root),
    APPLE_BUNDLE_ID: BUNDLE_ID,
    APPLE_ENVIRONMENT: 'Sandbox',
    OUTBOX_POLL_MS: '100',
    OUTBOX_RETRY_MAX_MS: '400',
    LOG_LEVEL: 'silent',
    ...env,
  });
  // With `logs`, every line billing logs is kept there (its refusals must name no secret).
  const logger = options.logs
    ? pino({ level: 'info', base: { service: 'billing' } }, { write: (line: string) => void options.logs!.push(line) })
    : createLogger('billing', config.LOG_LEVEL);
  const billing = await createBillingService(config, logger);
  const billingServer = await serve(billing.app, {
    port: 0,
    host: '127.0.0.1',
    logger: billing.logger,
    graceMs: 200,
    onDrain: billing.drain,
    onClose: [billing.close],
    metrics: { port: 0, metrics: billing.metrics },
  });
  stripe.setWebhookUrl(`${billingServer.url}${STRIPE_WEBHOOK}`);
  const database: Database = await openDatabase({ service: 'billing', url: billingDb, dataDir, migrations, logger: createLogger('billing', 'silent') });
  // The gateway again, now that billing's address is known (its proxy forwards /api/v1/billing/* there).
  await gateway.server.close();
  gateway = await startGatewayOn(gatewayPort, gatewayDb, dataDir, billingServer.url, redisPrefix);

  const call = <T = any>(method: string, path: string, init: { headers?: Record<string, string>; body?: unknown; raw?: string } = {}) =>
    request<T>(billingServer.url, path, { method, ...init });
  const gatewayRepository = () => {
    if (!gateway) throw new Error('the gateway is stopped');
    return gateway.instance.repository;
  };

  const harness: BillingHarness = {
    billing,
    db: database.knex,
    url: billingServer.url,
    metricsUrl: billingServer.metricsUrl!,
    get gateway() {
      return gateway;
    },
    gatewayUrl: `http://127.0.0.1:${gatewayPort}`,
    stripe,
    apple,
    appleRoot,
    call,
    async user() {
      const reply = await request(harness.gatewayUrl, '/api/v1/users/resolve', {
        method: 'POST',
        headers: { 'X-Service-Key': GATEWAY_KEY },
        body: { external_id: `buyer-${randomUUID()}` },
      });
      if (reply.status !== 201) throw new Error(`resolve: ${reply.status} ${JSON.stringify(reply.body)}`);
      return reply.body.user.id as string;
    },
    async balance(userId) {
      return (await gatewayRepository().ledger.balance(userId)) ?? 0;
    },
    async tier(userId) {
      return (await gatewayRepository().users.findUser(userId))!.tier;
    },
    async ledger(userId) {
      const page = await gatewayRepository().ledger.history(userId, 1000, 0);
      return page.items
        .reverse()
        .map((entry) => ({ amount: Number(entry.amount), kind: entry.kind, operation: entry.operation, idempotency_key: entry.idempotency_key }));
    },
    stripeEvent(event, options = {}) {
      const payload = options.raw ?? JSON.stringify(event, null, 2);
      const signature = options.signature ?? signatureFor(payload, options.secrets ?? [WEBHOOK_SECRET], options.timestamp);
      return call('POST', STRIPE_WEBHOOK, { raw: payload, headers: { 'content-type': 'application/json; charset=utf-8', 'stripe-signature': signature } });
    },
    appleNotification(body) {
      return call('POST', APPLE_WEBHOOK, { raw: body, headers: { 'content-type': 'application/json' } });
    },
    postTransaction(userId, signed) {
      return call('POST', '/api/v1/billing/apple/transactions', { headers: asUser(userId), body: { signed_transaction: signed } });
    },
    async settled(ms = 10_000) {
      const until = Date.now() + ms;
      for (;;) {
        await billing.outbox.deliver();
        const backlog = await billing.repository.outbox.backlog();
        const tiers = await database
          .knex('billing_accounts')
          .whereRaw(`((tier is distinct from pushed_tier and not (pushed_tier is null and tier = 'free')) or push_forced)`)
          .count<{ count: string }[]>('* as count');
        if (backlog.pending === 0 && Number(tiers[0]?.count ?? 0) === 0) return;
        if (Date.now() > until) {
          const accounts = await database.knex('billing_accounts').whereRaw('tier is distinct from pushed_tier or push_forced');
          throw new Error(`the outbox did not settle: ${JSON.stringify({ backlog, accounts })}`);
        }
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    },
    async stopGateway() {
      await gateway?.server.close();
      gateway = undefined;
    },
    async startGateway() {
      gateway = await startGatewayOn(gatewayPort, gatewayDb, dataDir, billingServer.url, redisPrefix);
    },
    async stop() {
      await database.close();
      await billingServer.close();
      await gateway?.server.close();
      await stripe.close();
      await Promise.all([dropDatabase(billingDb), dropDatabase(gatewayDb)]);
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
  return harness;
}
