import { randomBytes } from 'node:crypto';
import type { ServiceName } from '../../services/kit/src/runtime/config.ts';
import { createDatabase, dropDatabase } from '../support/database.ts';
import { type Platform, startPlatform } from '../support/platform.ts';
import { BUNDLE_ID, makeRoot, pemOf } from '../support/stand-ins/apple.ts';
import { startGitHub, startOidcProvider } from '../support/stand-ins/identity-providers.ts';

/** Each credential kind the services accept, valid on the fuzzed platform. */
export interface Credentials {
  serviceKey: string;
  adminKey: string;
  writerToken: string;
  simulationKey: string;
  /** A demo user's access token (the gateway's demo sign-in), its user id and a gateway API key of theirs. */
  userJwt: string;
  userId: string;
  userApiKey: string;
  /** A new demo user (20 credits): for the operations that end a session or an account, and for replays needing a known balance. */
  disposableUser(): Promise<{ jwt: string; id: string }>;
}

export interface FuzzPlatform {
  platform: Platform;
  urls: Record<ServiceName, string>;
  credentials: Credentials;
  stop(): Promise<void>;
}

// Limits far above what a run sends, so generated requests reach the logic behind the rate limiter; a 429
// is still documented and allowed, but a run answered mostly 429 would test nothing.
const UNLIMITED = '1000000';
const RATE_LIMITS = {
  RATE_LIMIT_MULTIPLIER: '1000',
  RATE_LIMIT_ANONYMOUS_PER_MINUTE: UNLIMITED,
  RATE_LIMIT_SERVICE_PER_MINUTE: UNLIMITED,
  RATE_LIMIT_PUBLIC_PER_MINUTE: UNLIMITED,
  RATE_LIMIT_READ_PER_MINUTE: UNLIMITED,
  RATE_LIMIT_WRITE_PER_MINUTE: UNLIMITED,
  CONDUCTOR_RATE_LIMIT_FREE: '100000',
  CONDUCTOR_RATE_LIMIT_PRO: '100000',
  CONDUCTOR_RATE_LIMIT_ENTERPRISE: '100000',
  CONDUCTOR_RATE_LIMIT_ANONYMOUS: '100000',
  DEMO_SIGNINS_PER_HOUR_LOOPBACK: '100000',
};

/**
 * The platform as `npm start` runs it on the test's PostgreSQL and Redis, with every optional integration
 * configured against local stand-ins (Apple and Google ID tokens, GitHub's OAuth, App Store signed data
 * under a test root), so no operation answers "not configured" and every one is reachable; model
 * providers are the offline ones. Tokens live a day, so a long run never sees its token expire.
 */
export async function startFuzzPlatform(): Promise<FuzzPlatform> {
  const [apple, google, github, appleRoot, databaseUrl] = await Promise.all([
    startOidcProvider('https://appleid.apple.com', BUNDLE_ID),
    startOidcProvider('https://accounts.google.com', 'tempora-web.apps.googleusercontent.com'),
    startGitHub(),
    makeRoot(),
    createDatabase('fuzz'),
  ]);
  const simulationKey = `fuzz-${randomBytes(12).toString('hex')}`;
  const closeStandIns = () => Promise.all([apple.close(), google.close(), github.close()]);
  let platform: Platform;
  try {
    platform = await startPlatform({
      shared: { databaseUrl, redisUrl: process.env.REDIS_URL! },
      env: {
        ...RATE_LIMITS,
        ACCESS_TOKEN_TTL_SECONDS: '86400',
        SIMULATION_API_KEYS: `fuzz:${simulationKey}`,
        APPLE_CLIENT_ID: BUNDLE_ID,
        APPLE_JWKS_URL: apple.jwksUrl,
        GOOGLE_CLIENT_ID: 'tempora-web.apps.googleusercontent.com',
        GOOGLE_JWKS_URL: google.jwksUrl,
        GITHUB_CLIENT_ID: github.clientId,
        GITHUB_CLIENT_SECRET: github.clientSecret,
        GITHUB_TOKEN_URL: github.tokenUrl,
        GITHUB_API_URL: github.apiUrl,
        APPLE_ROOT_CERTIFICATES: pemOf(appleRoot.certificate),
        APPLE_BUNDLE_ID: BUNDLE_ID,
        APPLE_ENVIRONMENT: 'Sandbox',
      },
    });
  } catch (error) {
    await closeStandIns();
    await dropDatabase(databaseUrl).catch(() => undefined);
    throw error;
  }
  const stop = async () => {
    await platform.stop();
    await closeStandIns();
    await dropDatabase(databaseUrl).catch(() => undefined);
  };
  try {
    const signIn = async () => {
      const response = await fetch(`${platform.urls.gateway}/api/v1/auth/demo`, { method: 'POST' });
      if (response.status !== 201) throw new Error(`demo sign-in answered ${response.status}: ${await response.text()}`);
      return (await response.json()) as { access_token: string; user: { id: string } };
    };
    const user = await signIn();
    const keyResponse = await fetch(`${platform.urls.gateway}/api/v1/users/me/api-keys`, {
      method: 'POST',
      headers: { authorization: `Bearer ${user.access_token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'fuzz' }),
    });
    if (keyResponse.status !== 201) throw new Error(`creating an API key answered ${keyResponse.status}: ${await keyResponse.text()}`);
    const { key } = (await keyResponse.json()) as { key: string };
    // npm start's development keys (startPlatform leaves them unset, so start.ts applies its defaults).
    const credentials: Credentials = {
      serviceKey: 'dev-service-key',
      adminKey: 'dev-admin-key',
      writerToken: 'dev-writer-token',
      simulationKey,
      userJwt: user.access_token,
      userId: user.user.id,
      userApiKey: key,
      disposableUser: async () => {
        const { access_token, user } = await signIn();
        return { jwt: access_token, id: user.id };
      },
    };
    return { platform, urls: platform.urls, credentials, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}
