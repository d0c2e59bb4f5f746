/**
 * Secrets never in logs or error bodies (issue 21, "Who gets in"). The platform (every service, worker and
 * the Stripe stand-in, LOG_LEVEL=debug) is driven through sign-in, refresh, API keys, a paid checkout with
 * its signed webhook, writer, admin, service and simulation credentials, a signed callback, and wrong and
 * near-miss values of each; then every line it printed, and every error body any suite of test/security
 * received (the authorization matrix's 1,900 among them), is searched for every configured and issued secret.
 */
import assert from 'node:assert/strict';
import { before, describe, it } from 'mocha';
import { waitFor } from '../support/wait.ts';
import { type SignedIn, signIn } from './credentials.ts';
import { CONFIGURED, ERROR_BODIES, SECRETS, type SecurityPlatform, SIGNING_JWK, STRIPE_DEV_KEY, securityPlatform } from './platform.ts';

interface Reply {
  status: number;
  text: string;
  json: any;
}

describe('security: no secret in any log line or error body', function () {
  this.timeout(300_000);
  let platform: SecurityPlatform;
  /** Issued during the run: tokens, refresh tokens, API keys. */
  const issued = new Map<string, string>();
  /** Every body received here, successes too (no configured secret may appear even in those). */
  const bodies: string[] = [];

  async function call(base: string, method: string, path: string, headers: Record<string, string> = {}, body?: unknown): Promise<Reply> {
    const response = await fetch(`${base}${path}`, {
      method,
      headers: { accept: 'application/json', ...headers, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(body === undefined ? {} : { body: typeof body === 'string' ? body : JSON.stringify(body) }),
      signal: AbortSignal.timeout(60_000),
    });
    const text = await response.text();
    bodies.push(text);
    if (response.status >= 400) ERROR_BODIES.push(`${response.status} ${text}`);
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      json = undefined;
    }
    return { status: response.status, text, json };
  }

  before(async function () {
    this.timeout(400_000);
    platform = await securityPlatform();
  });

  it('drives every credential, right and wrong, through the platform', async () => {
    const gw = platform.urls.gateway;
    const user: SignedIn = await signIn(gw);
    issued.set('access token', user.access);
    issued.set('refresh token', user.refresh);
    const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

    // Refresh, then replay the spent refresh token (reuse detection revokes the sign-in), then a near miss.
    const refreshed = await call(gw, 'POST', '/api/v1/auth/refresh', {}, { refresh_token: user.refresh });
    assert.equal(refreshed.status, 200, refreshed.text);
    issued.set('refreshed access token', refreshed.json.access_token);
    issued.set('refreshed refresh token', refreshed.json.refresh_token);
    assert.equal((await call(gw, 'POST', '/api/v1/auth/refresh', {}, { refresh_token: `${refreshed.json.refresh_token}x` })).status, 401);
    const fresh = await signIn(gw);
    issued.set('second access token', fresh.access);
    issued.set('second refresh token', fresh.refresh);

    // API keys: issued, used, a near miss, revoked and used again.
    const created = await call(gw, 'POST', '/api/v1/users/me/api-keys', bearer(fresh.access), { name: 'secrets', scopes: ['read', 'write'] });
    assert.equal(created.status, 201, created.text);
    issued.set('API key', created.json.key);
    assert.equal((await call(gw, 'GET', '/api/v1/credits/balance', { 'x-api-key': created.json.key })).status, 200);
    assert.equal((await call(gw, 'GET', '/api/v1/credits/balance', { 'x-api-key': `${created.json.key.slice(0, -1)}x` })).status, 401);
    assert.equal((await call(gw, 'DELETE', `/api/v1/users/me/api-keys/${created.json.id}`, bearer(fresh.access))).status, 204);
    assert.equal((await call(gw, 'GET', '/api/v1/credits/balance', { 'x-api-key': created.json.key })).status, 401);

    // Keys of every kind, right and near misses, at every service that reads them.
    const nearMiss = (value: string) => `${value.slice(0, -2)}zz`;
    for (const [service, path] of [
      ['gateway', '/api/v1/users/00000000-0000-4000-8000-000000000000/balance'],
      ['generation', '/api/v1/users/00000000-0000-4000-8000-000000000000/timepoints'],
      ['graph', '/browse'],
      ['simulation', '/api/v1/simulations'],
      ['conductor', '/api/v1/conductor/settings'],
      ['billing', '/api/v1/billing/packs'],
    ] as const) {
      const method = service === 'generation' ? 'DELETE' : 'GET';
      await call(platform.urls[service], method, path, { 'x-service-key': SECRETS.serviceKey });
      await call(platform.urls[service], method, path, { 'x-service-key': nearMiss(SECRETS.serviceKey) });
      await call(platform.urls[service], method, path, { 'x-admin-key': nearMiss(SECRETS.adminKey) });
      await call(platform.urls[service], method, path, bearer(nearMiss(SECRETS.writerToken)));
      await call(platform.urls[service], method, path, { 'x-api-key': nearMiss(SECRETS.simulationKey) });
    }
    const grant = await call(
      gw,
      'POST',
      '/api/v1/credits/admin/grant',
      { 'x-admin-key': SECRETS.adminKey },
      { user_id: fresh.id, amount: 5, reason: 'secrets test', idempotency_key: 'secrets-test-grant-1' },
    );
    assert.ok(grant.status === 200 || grant.status === 201, grant.text);
    const serviceToken = await call(gw, 'POST', '/api/v1/auth/service-token', { 'x-admin-key': SECRETS.adminKey }, { service: 'secrets-test' });
    assert.equal(serviceToken.status, 201, serviceToken.text);
    issued.set('service token', serviceToken.json.access_token);
    assert.equal((await call(platform.urls.simulation, 'GET', '/api/v1/simulations', bearer(serviceToken.json.access_token))).status, 200);
    assert.equal((await call(platform.urls.simulation, 'GET', '/api/v1/simulations', { 'x-api-key': SECRETS.simulationKey })).status, 200);
    assert.equal((await call(platform.urls.graph, 'POST', '/ingest/tdf', bearer(SECRETS.writerToken), [{ bogus: true }])).status, 422);

    // A paid checkout: Stripe's signed webhook through the gateway, and a forged one.
    const packs = await call(gw, 'GET', '/api/v1/billing/packs', bearer(fresh.access));
    assert.equal(packs.status, 200, packs.text);
    const checkout = await call(gw, 'POST', '/api/v1/billing/checkout', bearer(fresh.access), { kind: 'pack', id: packs.json.items[0].id });
    assert.equal(checkout.status, 201, checkout.text);
    const paid = await call(platform.stripe, 'POST', `/checkout/${checkout.json.id}/pay`);
    assert.ok(paid.status < 300, paid.text);
    const forged = await call(
      gw,
      'POST',
      '/api/v1/billing/webhooks/stripe',
      { 'stripe-signature': `t=${Math.floor(Date.now() / 1000)},v1=${'0'.repeat(64)}` },
      { id: 'evt_forged', type: 'checkout.session.completed' },
    );
    assert.equal(forged.status, 400, forged.text);
    const paidFor = async () => (await call(gw, 'GET', '/api/v1/credits/balance', bearer(fresh.access))).json.balance > grant.json.balance;
    await waitFor("the pack's credits granted", paidFor, { timeoutMs: 60_000, intervalMs: 500 });

    // Bad bearer tokens at every service that reads one, and sign-out and account deletion.
    for (const service of ['gateway', 'simulation', 'conductor', 'graph'] as const) {
      await call(platform.urls[service], 'GET', service === 'graph' ? '/browse' : '/api/v1/conductor/settings', bearer(`${fresh.access.slice(0, -4)}AAAA`));
    }
    assert.equal((await call(gw, 'POST', '/api/v1/auth/logout', bearer(user.access), { refresh_token: refreshed.json.refresh_token })).status < 300, true);
    assert.equal((await call(gw, 'DELETE', '/api/v1/auth/me', bearer(fresh.access))).status < 300, true);
    await call(gw, 'GET', '/api/v1/auth/me', bearer(fresh.access));
  });

  it('finds none of them in any log line or error body, and no configured secret in any body at all', async () => {
    // Give the services a moment to write what the last requests made them log. Time itself: no one line
    // marks the end of what they log (most requests log nothing), so there is no condition to wait on.
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    const secrets = new Map<string, string>([
      ['SERVICE_KEY', SECRETS.serviceKey],
      ['ADMIN_KEY', SECRETS.adminKey],
      ['WRITER_TOKENS token', SECRETS.writerToken],
      ['SIMULATION_API_KEYS key', SECRETS.simulationKey],
      ['CALLBACK_SECRET', SECRETS.callbackSecret],
      ['STRIPE_WEBHOOK_SECRET', SECRETS.stripeWebhookSecret],
      ['STRIPE_SECRET_KEY', STRIPE_DEV_KEY],
      ['JWT_PRIVATE_KEY (d)', SIGNING_JWK.d as string],
      ['JWT_PRIVATE_KEY', CONFIGURED.JWT_PRIVATE_KEY!],
      ...issued,
    ]);
    const lines = platform.output().split('\n');
    // Every process's output is here: each service said it listens (the services log little per request).
    for (const service of Object.keys(platform.urls))
      assert.ok(
        lines.some((line) => line.includes(`"service":"${service}"`)),
        `nothing logged by ${service}`,
      );
    const found: string[] = [];
    for (const [name, value] of secrets) {
      for (const line of lines) if (line.includes(value)) found.push(`log: ${name} in ${line.slice(0, 300)}`);
      for (const body of ERROR_BODIES) if (body.includes(value)) found.push(`error body: ${name} in ${body.slice(0, 300)}`);
    }
    for (const [name, value] of secrets) {
      if (issued.has(name)) continue;
      for (const body of bodies) if (body.includes(value)) found.push(`body: ${name} in ${body.slice(0, 300)}`);
    }
    console.log(`      ${secrets.size} secrets × ${lines.length} log lines and ${ERROR_BODIES.length} error bodies`);
    assert.deepEqual(found, []);
  });
});
