import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type StartedService, startService } from '../../../test/support/harness.ts';
import { type GitHubProvider, type OidcProvider, startGitHub, startOidcProvider } from '../../../test/support/stand-ins/identity-providers.ts';
import { startUpstream, type Upstream } from '../../../test/support/stand-ins/upstream.ts';
import { GatewayConfigSchema } from '../src/config.ts';
import { createGatewayService, type GatewayInstance } from '../src/service.ts';

export const SERVICE_KEY = 'gw-service-key-0123456789';
export const ADMIN_KEY = 'gw-admin-key-0123456789';
export const UPSTREAM_KEY = 'upstream-service-key-0123456789';
export const APPLE_CLIENT = 'dev.tempora.app';
export const GOOGLE_CLIENT = 'tempora-web.apps.googleusercontent.com';
export const DOMAIN = 'tempora.test';
export const admin = { 'X-Admin-Key': ADMIN_KEY };
export const service = { 'X-Service-Key': SERVICE_KEY };
export const bearer = (token: string) => ({ Authorization: `Bearer ${token}` });

/** A request through node:http whose answer is left paused, unread, for the test to read at its own pace. */
export async function pausedRequest(target: string, headers: Record<string, string>, method = 'GET', body?: string): Promise<IncomingMessage> {
  const url = new URL(target);
  const req = httpRequest({ hostname: url.hostname, port: url.port, path: url.pathname + url.search, method, headers });
  req.end(body);
  const [res] = (await once(req, 'response')) as [IncomingMessage];
  res.pause();
  return res;
}

export interface SignedIn {
  userId: string;
  access: string;
  refresh: string;
  headers: Record<string, string>;
}

export interface GatewayHarness extends StartedService<GatewayInstance> {
  apple: OidcProvider;
  google: OidcProvider;
  github: GitHubProvider;
  upstreams: Record<'generation' | 'graph' | 'billing' | 'simulation' | 'conductor', Upstream>;
  dataDir: string;
  /** A user through the admin dev-token route (each call with a new external id is a new user). */
  user(options?: { tier?: 'free' | 'pro' | 'enterprise'; externalId?: string }): Promise<SignedIn>;
  grant(userId: string, amount: number): Promise<void>;
}

/**
 * The gateway of a test suite: started before its tests (then handed to `ready`) and stopped after them.
 * With `resetUpstreams`, every upstream stand-in forgets its requests and handlers before each test.
 */
export function useGateway(
  ready: (gw: GatewayHarness) => void | Promise<void>,
  options: { env?: Record<string, string>; resetUpstreams?: boolean } = {},
): void {
  let gw: GatewayHarness | undefined;
  before(async () => {
    gw = await startGateway(options.env);
    await ready(gw);
  });
  after(async () => {
    await gw?.stop();
  });
  if (options.resetUpstreams) {
    beforeEach(() => {
      for (const upstream of Object.values(gw!.upstreams)) upstream.reset();
    });
  }
}

export async function startGateway(env: Record<string, string> = {}): Promise<GatewayHarness> {
  const [apple, google, github, generation, graph, billing, simulation, conductor] = await Promise.all([
    startOidcProvider('https://appleid.apple.com', APPLE_CLIENT),
    startOidcProvider('https://accounts.google.com', GOOGLE_CLIENT),
    startGitHub(),
    startUpstream('generation'),
    startUpstream('graph'),
    startUpstream('billing'),
    startUpstream('simulation'),
    startUpstream('conductor'),
  ]);
  const dataDir = mkdtempSync(join(tmpdir(), 'gateway-test-'));
  const started = await startService({
    name: 'gateway',
    schema: GatewayConfigSchema,
    create: createGatewayService,
    graceMs: 500,
    env: {
      TEMPORA_DATA_DIR: dataDir,
      TEMPORA_DOMAIN: DOMAIN,
      SERVICE_KEY: SERVICE_KEY,
      ADMIN_KEY: ADMIN_KEY,
      GENERATION_SERVICE_KEY: UPSTREAM_KEY,
      GRAPH_SERVICE_KEY: UPSTREAM_KEY,
      APPLE_CLIENT_ID: APPLE_CLIENT,
      APPLE_JWKS_URL: apple.jwksUrl,
      GOOGLE_CLIENT_ID: GOOGLE_CLIENT,
      GOOGLE_JWKS_URL: google.jwksUrl,
      GITHUB_CLIENT_ID: github.clientId,
      GITHUB_CLIENT_SECRET: github.clientSecret,
      GITHUB_TOKEN_URL: github.tokenUrl,
      GITHUB_API_URL: github.apiUrl,
      GENERATION_URL: generation.url,
      GRAPH_URL: graph.url,
      BILLING_URL: billing.url,
      SIMULATION_URL: simulation.url,
      CONDUCTOR_URL: conductor.url,
      // The tests' clients play the ingress too: loopback is the trusted proxy.
      TRUSTED_PROXIES: '127.0.0.1',
      RATE_LIMIT_MULTIPLIER: '1000',
      DEMO_SIGNINS_PER_HOUR: '1000',
      UPSTREAM_TIMEOUT_MS: '1500',
      SYNC_GENERATION_TIMEOUT_MS: '1500',
      // Tests run the account-deletion sweep themselves; a failed step is due again at once.
      ACCOUNT_DELETION_SWEEP_MS: '3600000',
      ACCOUNT_DELETION_RETRY_MS: '1',
      ...env,
    },
  });
  const { call } = started;
  let users = 0;
  return {
    ...started,
    apple,
    google,
    github,
    upstreams: { generation, graph, billing, simulation, conductor },
    dataDir,
    call,
    async user(options = {}) {
      const externalId = options.externalId ?? `user-${(users += 1)}-${randomBytes(4).toString('hex')}`;
      const reply = await call('POST', '/api/v1/auth/dev/token', {
        headers: admin,
        body: { external_id: externalId, ...(options.tier ? { tier: options.tier } : {}) },
      });
      if (reply.status >= 300) throw new Error(`dev token: ${reply.status} ${JSON.stringify(reply.body)}`);
      return { userId: reply.body.user.id, access: reply.body.access_token, refresh: reply.body.refresh_token, headers: bearer(reply.body.access_token) };
    },
    async grant(userId, amount) {
      const reply = await call('POST', '/api/v1/credits/admin/grant', {
        headers: admin,
        body: { user_id: userId, amount, reason: 'test', idempotency_key: randomBytes(8).toString('hex') },
      });
      if (reply.status !== 201) throw new Error(`grant: ${reply.status} ${JSON.stringify(reply.body)}`);
    },
    async stop() {
      await started.stop();
      await Promise.all([
        apple.close(),
        google.close(),
        github.close(),
        generation.close(),
        graph.close(),
        billing.close(),
        simulation.close(),
        conductor.close(),
      ]);
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
