import { type Database, openDatabase } from '@tempora/kit/data';
import { adminKeyAuth, createApp, type ServiceDefinition, serviceKeyAuth } from '@tempora/kit/http';
import { createLogger, type Logger, Metrics } from '@tempora/kit/observability';
import { sizeInBytes } from '@tempora/kit/runtime';
import type Koa from 'koa';
import { AppleChannel } from './apple-channel.ts';
import { AccountData } from './application/account-data.ts';
import { ChannelService } from './application/channels.ts';
import { OperatorService } from './application/operators.ts';
import { SubscriptionService } from './application/subscriptions.ts';
import { Book } from './book.ts';
import type { BillingConfig } from './config.ts';
import { Catalogue } from './domain/catalogue.ts';
import { GatewayClient } from './gateway-client.ts';
import { BillingMetrics } from './metrics.ts';
import { migrations } from './migrations.ts';
import { Outbox } from './outbox.ts';
import { rawBodyUnder } from './raw-body.ts';
import { BillingRepository } from './repository/index.ts';
import { accountRoutes } from './routes/account.ts';
import { accountDataRoutes } from './routes/account-data.ts';
import { catalogueRoutes } from './routes/catalogue.ts';
import type { BillingRouteDeps, ConfiguredChannels } from './routes/context.ts';
import { operatorRoutes } from './routes/operators.ts';
import { planRoutes } from './routes/plans.ts';
import { WEBHOOK_PREFIX, webhookRoutes } from './routes/webhooks.ts';
import { StripeChannel } from './stripe-channel.ts';
import { VERSION } from './version.ts';

export { VERSION };

export interface BillingInstance {
  app: Koa;
  openapi: object;
  logger: Logger;
  /** Served on METRICS_PORT, apart from the API. */
  metrics: Metrics;
  /** What the tests drive and inspect directly, beside the HTTP interface. */
  repository: BillingRepository;
  book: Book;
  outbox: Outbox;
  drain(): void;
  close(): Promise<void>;
}

/** Past-due subscribers are looked at this often for a grace period that ran out. */
const LAPSE_EVERY_MS = 60_000;
/** What an outbox lease allows beyond the gateway call's time-out: the database statements before and after it. */
const LEASE_MARGIN_MS = 5_000;

export async function createBillingService(config: BillingConfig, logger = createLogger('billing', config.LOG_LEVEL)): Promise<BillingInstance> {
  const database = await openDatabase({ service: 'billing', url: config.DATABASE_URL, dataDir: config.TEMPORA_DATA_DIR, migrations, logger });
  // A delivery's lease covers its gateway call (cut at GATEWAY_TIMEOUT_MS) and the statements around it;
  // an entry whose process was killed mid-call is delivered again by another once the lease runs out.
  const repository = new BillingRepository(database.knex, config.GATEWAY_TIMEOUT_MS + LEASE_MARGIN_MS);
  const metrics = new Metrics('billing');
  const { book, outbox, deps } = applicationLayer(config, logger, repository, metrics);
  const { app, openapi, drain } = createApp(appDefinition(config, logger, { database, repository, metrics, deps }));
  outbox.start();

  return {
    app,
    openapi,
    logger,
    metrics,
    repository,
    book,
    outbox,
    drain,
    close: async () => {
      await outbox.stop();
      await database.close();
    },
  };
}

/** The book, the outbox to the gateway, the two payment channels and the application services the routes call. */
function applicationLayer(
  config: BillingConfig,
  logger: Logger,
  repository: BillingRepository,
  metrics: Metrics,
): { book: Book; outbox: Outbox; deps: BillingRouteDeps } {
  const catalogue = new Catalogue(config.BILLING_CATALOGUE);
  const billingMetrics = new BillingMetrics(metrics, repository.outbox);
  const graceMs = config.PAST_DUE_GRACE_DAYS * 86_400_000;
  const book = new Book(repository, catalogue, graceMs);
  const gateway = new GatewayClient(config.GATEWAY_URL, config.GATEWAY_SERVICE_KEY ?? config.SERVICE_KEY[0], config.GATEWAY_TIMEOUT_MS);
  const outbox = new Outbox(
    repository,
    gateway,
    billingMetrics,
    logger.child({ component: 'outbox' }),
    { pollMs: config.OUTBOX_POLL_MS, retryMaxMs: config.OUTBOX_RETRY_MAX_MS, lapseEveryMs: LAPSE_EVERY_MS },
    () => book.lapsePastDue(),
  );
  const stripe = new StripeChannel(config, catalogue);
  const apple = new AppleChannel(config, catalogue);
  const configured: ConfiguredChannels = { checkout: stripe.canCheckout, stripeWebhooks: stripe.canVerify, apple: apple.configured };
  const subscriptions = new SubscriptionService({
    repository,
    catalogue,
    book,
    outbox,
    stripe,
    metrics: billingMetrics,
    logger,
    graceMs,
    portalReturnUrl: config.PORTAL_RETURN_URL ?? config.CHECKOUT_CANCEL_URL ?? '',
  });
  const deps: BillingRouteDeps = {
    catalogue,
    subscriptions,
    channels: new ChannelService({ repository, book, outbox, stripe, apple, metrics: billingMetrics, logger }),
    operators: new OperatorService({ repository, subscriptions, book, outbox, stripe, logger }),
    accountData: new AccountData(repository, stripe, catalogue, graceMs, logger.child({ component: 'account-data' })),
    configured,
    metrics: billingMetrics,
    logger,
  };
  return { book, outbox, deps };
}

/** The HTTP side: who may call, the raw bodies the webhooks verify, the route groups and what /health reports. */
function appDefinition(
  config: BillingConfig,
  logger: Logger,
  { database, repository, metrics, deps }: { database: Database; repository: BillingRepository; metrics: Metrics; deps: BillingRouteDeps },
): ServiceDefinition {
  const { configured } = deps;
  return {
    name: 'billing',
    version: VERSION,
    title: 'Tempora billing service',
    description:
      "Credit packs and monthly plans, bought through Stripe Checkout or the App Store, verified and turned into credits in the gateway's ledger and into gateway tiers, each exactly once (docs/billing.md). Internal: users reach it through the gateway (X-User-ID with its service key); the two webhook receivers authenticate by signature; the gateway deletes and exports a user's billing data through /api/v1/users/{user_id}/data.",
    config,
    logger,
    metrics,
    authenticators: [serviceKeyAuth(config.SERVICE_KEY), adminKeyAuth(config.ADMIN_KEY)],
    beforeBody: [rawBodyUnder(WEBHOOK_PREFIX, sizeInBytes(config.WEBHOOK_BODY_LIMIT))],
    routes: [
      ...catalogueRoutes(deps),
      ...accountRoutes(deps),
      ...planRoutes(deps),
      ...webhookRoutes(deps),
      ...operatorRoutes(deps),
      ...accountDataRoutes(deps),
    ],
    health: async () => {
      const db = await database.ping();
      const backlog = db ? await repository.outbox.backlog() : undefined;
      return {
        status: db ? 'ok' : 'degraded',
        database: db,
        stripe: { checkout: configured.checkout, webhooks: configured.stripeWebhooks },
        apple: configured.apple,
        outbox: backlog ? { pending: backlog.pending, failed: backlog.failed } : null,
      };
    },
  };
}
