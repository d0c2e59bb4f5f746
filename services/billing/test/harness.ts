import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Database, type Knex, openDatabase } from '@tempora/kit/data';
import { createLogger } from '@tempora/kit/observability';
import { pino } from 'pino';
import { createDatabase, dropDatabase } from '../../../test/support/database.ts';
import { type StartedService, startRelay, startService } from '../../../test/support/harness.ts';
import { type Reply, request } from '../../../test/support/http.ts';
import { BUNDLE_ID, type Chain, makeChain, makeRoot, pemOf } from '../../../test/support/stand-ins/apple.ts';
import { type StripeStandIn, signatureFor, startStripeStandIn } from '../../../test/support/stand-ins/stripe.ts';
import { waitFor } from '../../../test/support/wait.ts';
import { GatewayConfigSchema } from '../../gateway/src/config.ts';
import { createGatewayService, type GatewayInstance } from '../../gateway/src/service.ts';
import { BillingConfigSchema } from '../src/config.ts';
import { migrations } from '../src/migrations.ts';
import { type BillingInstance, createBillingService } from '../src/service.ts';

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

export type Gateway = StartedService<GatewayInstance>;

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

/** The gateway billing pushes tiers and credits to, on its own database (kept across its restarts). */
function startGatewayFor(database: string, dataDir: string, billingUrl: string, redisPrefix: string): Promise<Gateway> {
  return startService({
    name: 'gateway',
    schema: GatewayConfigSchema,
    create: createGatewayService,
    graceMs: 200,
    env: {
      DATABASE_URL: database,
      REDIS_KEY_PREFIX: redisPrefix,
      TEMPORA_DATA_DIR: dataDir,
      SERVICE_KEY: GATEWAY_KEY,
      ADMIN_KEY,
      BILLING_SERVICE_KEY: SERVICE_KEY,
      BILLING_URL: billingUrl,
      SIGNUP_CREDITS: '0',
      RATE_LIMIT_MULTIPLIER: '1000',
    },
  });
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

  // Billing reaches the gateway through a relay bound before either starts: the gateway, started once
  // billing's address is known, can stop and come back while billing keeps calling the same address.
  const relay = await startRelay();
  const started = await startService({
    name: 'billing',
    schema: BillingConfigSchema,
    create: createBillingService,
    graceMs: 200,
    // With `logs`, every line billing logs is kept there (its refusals must name no secret).
    ...(options.logs ? { logger: pino({ level: 'info', base: { service: 'billing' } }, { write: (line: string) => void options.logs!.push(line) }) } : {}),
    env: {
      DATABASE_URL: billingDb,
      SERVICE_KEY,
      ADMIN_KEY,
      GATEWAY_URL: relay.url,
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
      ...env,
    },
  });
  const billing = started.instance;
  stripe.setWebhookUrl(`${started.url}${STRIPE_WEBHOOK}`);
  const database: Database = await openDatabase({ service: 'billing', url: billingDb, dataDir, migrations, logger: createLogger('billing', 'silent') });
  let gateway: Gateway | undefined;
  const startGateway = async () => {
    gateway = await startGatewayFor(gatewayDb, dataDir, started.url, redisPrefix);
    relay.to(gateway.url);
  };
  await startGateway();

  const { call } = started;
  const gatewayRepository = () => {
    if (!gateway) throw new Error('the gateway is stopped');
    return gateway.instance.repository;
  };

  const harness: BillingHarness = {
    billing,
    db: database.knex,
    url: started.url,
    metricsUrl: started.metricsUrl,
    get gateway() {
      return gateway;
    },
    gatewayUrl: relay.url,
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
      let seen: unknown;
      await waitFor(
        'the outbox to settle',
        async () => {
          await billing.outbox.deliver();
          const backlog = await billing.repository.outbox.backlog();
          const unpushed = await database
            .knex('billing_accounts')
            .whereRaw(`((tier is distinct from pushed_tier and not (pushed_tier is null and tier = 'free')) or push_forced)`);
          seen = { backlog, accounts: unpushed };
          return backlog.pending === 0 && unpushed.length === 0;
        },
        { timeoutMs: ms, intervalMs: 100 },
      ).catch((error: Error) => {
        throw new Error(`${error.message}: ${JSON.stringify(seen)}`);
      });
    },
    async stopGateway() {
      relay.to(undefined);
      await gateway?.stop();
      gateway = undefined;
    },
    startGateway,
    async stop() {
      await database.close();
      await started.stop();
      await gateway?.stop();
      await relay.stop();
      await stripe.close();
      await Promise.all([dropDatabase(billingDb), dropDatabase(gatewayDb)]);
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
  return harness;
}
