/**
 * One platform for every suite of test/security, as `npm start` runs it (test/support/platform.ts) on the
 * test's PostgreSQL and Redis, started once on first use and stopped after the whole run. Every secret it
 * holds is set here, so the suites can present each credential and grep for each secret; LOG_LEVEL=debug,
 * so the secrets check reads everything the services say.
 */

import { generateKeyPairSync, randomBytes } from 'node:crypto';
import type { RequestListener } from 'node:http';
import { after } from 'mocha';
import { createDatabase, dropDatabase } from '../support/database.ts';
import { listenStandIn } from '../support/http.ts';
import { type Platform, startPlatform } from '../support/platform.ts';

const secret = (label: string) => `${label}-${randomBytes(18).toString('base64url')}`;
const signing = generateKeyPairSync('ec', { namedCurve: 'P-256' });

export const SECRETS = {
  serviceKey: secret('svc'),
  adminKey: secret('adm'),
  writerToken: secret('wrt'),
  simulationKey: secret('sim'),
  callbackSecret: secret('cb'),
  stripeWebhookSecret: `whsec_${randomBytes(18).toString('hex')}`,
};

/** The gateway's ES256 signing key (JWT_PRIVATE_KEY): the suites sign expired tokens with the real key. */
export const SIGNING_KEY = signing.privateKey;
export const SIGNING_JWK = signing.privateKey.export({ format: 'jwk' });

let answerCallback: RequestListener = (_request, response) => response.writeHead(503).end();
/**
 * The one callback receiver the platform's allow-list admits (host and port pinned). It listens from the
 * moment the suites load, though test/security/callbacks-ssrf.test.ts answers on it minutes later: a port
 * only found free at load was by then another connection's (CI saw EADDRINUSE).
 */
const callbackReceiver = await listenStandIn((request, response) => answerCallback(request, response));
export const CALLBACK_PORT = Number(new URL(callbackReceiver.url).port);
/** Sets how the callback receiver answers. */
export function answerCallbacks(handler: RequestListener): void {
  answerCallback = handler;
}

/** The secrets' configured values, by the variable that holds them. */
/** `npm start`'s Stripe stand-in key (start.ts sets it when STRIPE_SECRET_KEY is unset, which startPlatform ensures). */
export const STRIPE_DEV_KEY = 'sk_test_tempora_dev';

export const CONFIGURED: Record<string, string> = {
  SERVICE_KEY: SECRETS.serviceKey,
  ADMIN_KEY: SECRETS.adminKey,
  WRITER_TOKENS: `matrix:${SECRETS.writerToken}`,
  SIMULATION_API_KEYS: `matrix:${SECRETS.simulationKey}`,
  CALLBACK_SECRET: SECRETS.callbackSecret,
  STRIPE_WEBHOOK_SECRET: SECRETS.stripeWebhookSecret,
  JWT_PRIVATE_KEY: JSON.stringify(SIGNING_JWK),
};

/** Every error body (status 400 and above) any suite here received, for the secrets check. */
export const ERROR_BODIES: string[] = [];

export interface SecurityPlatform extends Platform {
  databaseUrl: string;
}

let started: Promise<SecurityPlatform> | undefined;

export function securityPlatform(): Promise<SecurityPlatform> {
  started ??= (async () => {
    const databaseUrl = await createDatabase('security');
    const platform = await startPlatform({
      shared: { databaseUrl, redisUrl: process.env.REDIS_URL! },
      env: {
        ...CONFIGURED,
        CALLBACK_ALLOWLIST: `127.0.0.1:${CALLBACK_PORT}`,
        CALLBACK_BACKOFF_MS: '100',
        LOG_LEVEL: 'debug',
        // The matrix sends some 2,000 requests from one address in a minute: no rate limit may answer for the policy.
        RATE_LIMIT_MULTIPLIER: '1000',
        RATE_LIMIT_ANONYMOUS_PER_MINUTE: '100000',
        RATE_LIMIT_PUBLIC_PER_MINUTE: '100000',
        RATE_LIMIT_READ_PER_MINUTE: '100000',
        RATE_LIMIT_WRITE_PER_MINUTE: '100000',
        CONDUCTOR_RATE_LIMIT_FREE: '100000',
        CONDUCTOR_RATE_LIMIT_ANONYMOUS: '100000',
        DEMO_SIGNINS_PER_HOUR_LOOPBACK: '100000',
      },
    });
    return { ...platform, databaseUrl };
  })();
  return started;
}

after(async function () {
  this.timeout(60_000);
  await callbackReceiver.stop();
  if (!started) return;
  const platform = await started.catch(() => undefined);
  if (!platform) return;
  await platform.stop();
  await dropDatabase(platform.databaseUrl).catch(() => {});
});
