import { join, resolve } from 'node:path';
import { connectRedis, type Database, type Knex, openDatabase, type RedisClient } from '@tempora/kit/data';
import { createApp, createProxyTrust, type ExpressLane, RateLimiter } from '@tempora/kit/http';
import { createLogger, type Logger, Metrics } from '@tempora/kit/observability';
import { sizeInBytes } from '@tempora/kit/runtime';
import type Koa from 'koa';
import { AccountDeletions } from './accounts/account-deletions.ts';
import { AccountServices } from './accounts/account-services.ts';
import { AccountsService } from './accounts-service.ts';
import { AuthCache } from './auth-cache.ts';
import { AuthService } from './auth-service.ts';
import { ChargedJobs } from './charged-jobs.ts';
import type { GatewayConfig } from './config.ts';
import { type Authentication, authenticate, requireScope } from './credentials.ts';
import { Credits } from './domain/credits.ts';
import { KeyStore } from './domain/keys.ts';
import type { LimitSettings } from './domain/limits.ts';
import { GitHubSignIn, OidcVerifier } from './domain/providers.ts';
import { TokenService } from './domain/tokens.ts';
import { LedgerService } from './ledger-service.ts';
import { GatewayMetrics } from './metrics.ts';
import { migrations } from './migrations.ts';
import { expressLane } from './proxy/express-lane.ts';
import { Proxy } from './proxy/proxy.ts';
import { canonicalRequestTarget } from './proxy/request-target.ts';
import type { UpstreamName, UpstreamTarget } from './proxy/routing.ts';
import { countRejection, gatewayWindows, reportUncounted, userWindows } from './rate-limiting.ts';
import { GatewayRepository } from './repository/index.ts';
import { authRoutes } from './routes/auth.ts';
import { balanceRoutes } from './routes/balances.ts';
import { billingLedgerRoutes } from './routes/billing-ledger.ts';
import type { GatewayRouteDeps } from './routes/context.ts';
import { creditRoutes } from './routes/credits.ts';
import { identityRoutes } from './routes/identities.ts';
import { introspectionRoutes } from './routes/introspection.ts';
import { userRoutes } from './routes/users.ts';
import { VERSION } from './version.ts';

export { VERSION };

export interface GatewayInstance {
  app: Koa;
  express: ExpressLane;
  openapi: object;
  logger: Logger;
  /** Served on METRICS_PORT, apart from the API. */
  metrics: Metrics;
  /** The application services the routes call. */
  deps: GatewayRouteDeps;
  repository: GatewayRepository;
  /** For the tests' own look at the rows. */
  knex: Knex;
  /** Shared by the app, the express lane and the demo sign-in. */
  limiter: RateLimiter;
  drain(): void;
  close(): Promise<void>;
}

export async function createGatewayService(config: GatewayConfig, logger = createLogger('gateway', config.LOG_LEVEL)): Promise<GatewayInstance> {
  const { database, redis, repository } = await openStores(config, logger);
  const keys = signingKeys(config);
  const metrics = new Metrics('gateway');
  const gatewayMetrics = new GatewayMetrics(metrics);
  const base: Foundation = { config, logger, repository, gatewayMetrics, keys };
  const limiter = new RateLimiter({ redis, prefix: `${config.REDIS_KEY_PREFIX}:gateway` });
  const charging = chargingServices(base);
  const { jobs, proxy } = charging;
  const { deps, authCache, deletions } = applicationServices(base, limiter, charging);
  const limits = limitSettings(config);
  const rejected = countRejection(gatewayMetrics);
  const authentication = authenticate({
    cache: authCache,
    keys,
    repository,
    issuer: config.JWT_ISSUER,
    audience: config.JWT_AUDIENCE,
    serviceKeys: config.SERVICE_KEY,
    adminKey: config.ADMIN_KEY,
  });
  const { app, openapi, drain } = createGatewayApp(base, { metrics, limiter, limits, rejected, authentication, deps, database, redis });

  jobs.start();
  deletions.start();
  return {
    app,
    express: expressLane({
      authentication,
      limiter,
      windows: (user, kind) => userWindows(user, kind, limits),
      onLimited: rejected,
      proxy,
      metrics,
      gatewayMetrics,
      logger,
    }),
    openapi,
    logger,
    metrics,
    deps,
    repository,
    knex: database.knex,
    limiter,
    drain,
    close: async () => {
      await jobs.stop();
      await deletions.stop();
      await proxy.close().catch(() => undefined);
      await redis?.quit().catch(() => undefined);
      await database.close();
    },
  };
}

/** What the composition steps after the stores build on. */
interface Foundation {
  config: GatewayConfig;
  logger: Logger;
  repository: GatewayRepository;
  gatewayMetrics: GatewayMetrics;
  keys: KeyStore;
}

async function openStores(config: GatewayConfig, logger: Logger) {
  const database = await openDatabase({
    service: 'gateway',
    url: config.DATABASE_URL,
    dataDir: config.TEMPORA_DATA_DIR,
    migrations,
    logger,
    pool: { min: 0, max: 20 },
  });
  const redis = await connectRedis(config.REDIS_URL, logger);
  return { database, redis, repository: new GatewayRepository(database.knex) };
}

function signingKeys(config: GatewayConfig): KeyStore {
  return new KeyStore({
    configuredKey: config.JWT_PRIVATE_KEY,
    previousKeys: config.JWT_PREVIOUS_KEYS,
    // Beside, not inside, the embedded database's own directory (TEMPORA_DATA_DIR/gateway).
    file: join(resolve(config.TEMPORA_DATA_DIR), 'gateway-keys', 'signing-keys.json'),
    rotationMs: config.JWT_ROTATION_DAYS * 86_400_000,
    retainMs: Math.max(config.ACCESS_TOKEN_TTL_SECONDS, config.SERVICE_TOKEN_MAX_TTL_SECONDS) * 1000 + 60_000,
  });
}

function tokenService({ config, repository, gatewayMetrics, keys }: Foundation): TokenService {
  return new TokenService(
    keys,
    repository,
    {
      issuer: config.JWT_ISSUER,
      audience: config.JWT_AUDIENCE,
      accessTtlSeconds: config.ACCESS_TOKEN_TTL_SECONDS,
      refreshTtlDays: config.REFRESH_TOKEN_TTL_DAYS,
      reuseGraceSeconds: config.REFRESH_REUSE_GRACE_SECONDS,
    },
    (outcome) => gatewayMetrics.tokenRefreshes.inc({ outcome }),
  );
}

/** The upstream services, each with its own service key or the gateway's first. */
function upstreamsOf(config: GatewayConfig): Record<UpstreamName, UpstreamTarget> {
  const defaultKey = config.SERVICE_KEY[0];
  const upstreamKey = (own: string | undefined) => own ?? defaultKey;
  return {
    generation: { url: config.GENERATION_URL, serviceKey: upstreamKey(config.GENERATION_SERVICE_KEY) },
    graph: { url: config.GRAPH_URL, serviceKey: upstreamKey(config.GRAPH_SERVICE_KEY) },
    billing: { url: config.BILLING_URL, serviceKey: upstreamKey(config.BILLING_SERVICE_KEY) },
    simulation: { url: config.SIMULATION_URL, serviceKey: upstreamKey(config.SIMULATION_SERVICE_KEY) },
    conductor: { url: config.CONDUCTOR_URL, serviceKey: upstreamKey(config.CONDUCTOR_SERVICE_KEY) },
  };
}

type Charging = ReturnType<typeof chargingServices>;

/** The credits, the proxy that charges them and the charged jobs it follows until they settle. */
function chargingServices({ config, logger, repository, gatewayMetrics }: Foundation) {
  const credits = new Credits(repository, gatewayMetrics, logger, { callMaxMs: config.CHARGED_CALL_MAX_MS, settleGraceMs: config.CHARGE_SETTLE_GRACE_MS });
  const upstreams = upstreamsOf(config);
  const jobs = new ChargedJobs(repository.chargedJobs, credits, { upstreams, checkMs: config.CHARGED_JOB_CHECK_MS }, logger);
  const proxy = new Proxy(
    {
      upstreams,
      timeoutMs: config.UPSTREAM_TIMEOUT_MS,
      syncGenerationTimeoutMs: config.SYNC_GENERATION_TIMEOUT_MS,
      bodyTimeoutMs: config.UPSTREAM_BODY_TIMEOUT_MS,
      connectTimeoutMs: config.UPSTREAM_CONNECT_TIMEOUT_MS,
      bodyLimitBytes: sizeInBytes(config.BODY_LIMIT),
      trust: createProxyTrust(config),
    },
    credits,
    jobs,
    gatewayMetrics,
    logger,
  );
  return { credits, upstreams, jobs, proxy };
}

function identityProviders(config: GatewayConfig) {
  return {
    apple: new OidcVerifier({
      name: 'apple',
      issuers: [config.APPLE_ISSUER],
      jwksUrl: config.APPLE_JWKS_URL,
      audiences: config.APPLE_CLIENT_ID,
      timeoutMs: config.IDP_TIMEOUT_MS,
    }),
    google: new OidcVerifier({
      name: 'google',
      issuers: config.GOOGLE_ISSUER,
      jwksUrl: config.GOOGLE_JWKS_URL,
      audiences: config.GOOGLE_CLIENT_ID,
      timeoutMs: config.IDP_TIMEOUT_MS,
    }),
    github: new GitHubSignIn({
      clientId: config.GITHUB_CLIENT_ID,
      clientSecret: config.GITHUB_CLIENT_SECRET,
      tokenUrl: config.GITHUB_TOKEN_URL,
      apiUrl: config.GITHUB_API_URL,
      timeoutMs: config.IDP_TIMEOUT_MS,
    }),
  };
}

/** The application services the routes call, and the credential cache they share with the authentication. */
function applicationServices(base: Foundation, limiter: RateLimiter, { credits, upstreams, jobs, proxy }: Charging) {
  const { config, logger, repository, gatewayMetrics, keys } = base;
  const authCache = new AuthCache(config.AUTH_CACHE_MS);
  const accountServices = new AccountServices(upstreams, config.UPSTREAM_TIMEOUT_MS);
  const deletions = new AccountDeletions(
    repository.deletions,
    accountServices,
    { retryMs: config.ACCOUNT_DELETION_RETRY_MS, sweepMs: config.ACCOUNT_DELETION_SWEEP_MS },
    logger,
  );
  const auth = new AuthService({
    config,
    repository,
    tokens: tokenService(base),
    keys,
    providers: identityProviders(config),
    limiter,
    metrics: gatewayMetrics,
    authCache,
  });
  const accounts = new AccountsService({
    repository,
    authCache,
    metrics: gatewayMetrics,
    accountServices,
    deletions,
    logger,
    signupCredits: config.SIGNUP_CREDITS,
  });
  const ledger = new LedgerService({ config, repository, credits, jobs });
  const deps: GatewayRouteDeps = { config, auth, accounts, ledger, proxy };
  return { deps, authCache, deletions };
}

function limitSettings(config: GatewayConfig): LimitSettings {
  return {
    multiplier: config.RATE_LIMIT_MULTIPLIER,
    anonymousPerMinute: config.RATE_LIMIT_ANONYMOUS_PER_MINUTE,
    servicePerMinute: config.RATE_LIMIT_SERVICE_PER_MINUTE,
    authenticatedReadsPerMinute: config.RATE_LIMIT_AUTHENTICATED_READS_PER_MINUTE,
    authenticatedWritesPerMinute: config.RATE_LIMIT_AUTHENTICATED_WRITES_PER_MINUTE,
    tiers: config.RATE_LIMIT_TIERS,
  };
}

interface AppParts {
  metrics: Metrics;
  limiter: RateLimiter;
  limits: LimitSettings;
  rejected: ReturnType<typeof countRejection>;
  authentication: Authentication;
  deps: GatewayRouteDeps;
  database: Database;
  redis: RedisClient | undefined;
}

function createGatewayApp({ config, logger }: Foundation, { metrics, limiter, limits, rejected, authentication, deps, database, redis }: AppParts) {
  return createApp({
    name: 'gateway',
    version: VERSION,
    title: 'Tempora gateway',
    description:
      'The single entry point: sign-in, tokens, API keys, credits, rate limits. Every other /api/v1/ path is proxied: /api/v1/graph/* to the graph service, /api/v1/billing/* to billing, /api/v1/simulate to simulation, /api/v1/conductor/* to the conductor, everything else to the generation service.',
    config,
    logger,
    metrics,
    authenticators: [],
    identify: authentication.middleware,
    rateLimit: { limiter, windows: gatewayWindows(limits), onLimited: (ctx, refusedBy) => rejected(refusedBy, ctx.state.user) },
    beforeOperations: [canonicalRequestTarget, reportUncounted(authentication, limiter, gatewayWindows(limits), logger)],
    beforeBody: [
      async (ctx, next) => {
        requireScope(ctx);
        await next();
      },
      deps.proxy.middleware(),
    ],
    routes: [
      ...authRoutes(deps),
      ...identityRoutes(deps),
      ...userRoutes(deps),
      ...creditRoutes(deps),
      ...billingLedgerRoutes(deps),
      ...balanceRoutes(deps),
      ...introspectionRoutes(deps),
    ],
    health: async () => {
      const db = await database.ping();
      return { status: db ? 'ok' : 'degraded', database: db, redis: redis ? redis.isReady : null };
    },
  });
}
