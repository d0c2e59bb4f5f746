import assert from 'node:assert/strict';
import { admin, type GatewayHarness, service, startGateway } from './harness.ts';

describe('gateway token introspection (RFC 7662)', function () {
  let gw: GatewayHarness;
  const introspect = (token: string, headers: Record<string, string> = service) => gw.call('POST', '/api/v1/auth/introspect', { headers, body: { token } });

  before(async function () {
    this.timeout(60_000);
    gw = await startGateway({ AUTH_CACHE_MS: '0' });
  });
  after(async () => gw?.stop());

  it('answers a live user token with its claims and the tier now', async () => {
    const user = await gw.user({ tier: 'pro' });
    const reply = await introspect(user.access);
    assert.equal(reply.status, 200);
    assert.equal(reply.headers.get('cache-control'), 'no-store');
    assert.equal(reply.body.active, true);
    assert.equal(reply.body.sub, user.userId);
    assert.equal(reply.body.tier, 'pro');
    assert.equal(reply.body.token_type, 'access_token');
    assert.equal(reply.body.iss, 'tempora-gateway');
    assert.ok(reply.body.exp > reply.body.iat);
  });

  it('takes the form encoding RFC 7662 specifies', async () => {
    const user = await gw.user();
    const reply = await gw.call('POST', '/api/v1/auth/introspect', {
      headers: { ...service, 'content-type': 'application/x-www-form-urlencoded' },
      raw: new URLSearchParams({ token: user.access, token_type_hint: 'access_token' }).toString(),
    });
    assert.equal(reply.status, 200);
    assert.equal(reply.body.active, true);
    assert.equal(reply.body.sub, user.userId);
  });

  it("turns inactive after a sign-out, a sign-out of every session, and the account's deletion", async () => {
    const one = await gw.user();
    assert.equal((await gw.call('POST', '/api/v1/auth/logout', { headers: one.headers, body: { refresh_token: one.refresh } })).status, 204);
    assert.deepEqual((await introspect(one.access)).body, { active: false });

    const everywhere = await gw.user();
    assert.equal((await gw.call('POST', '/api/v1/auth/logout', { headers: everywhere.headers })).status, 204);
    assert.deepEqual((await introspect(everywhere.access)).body, { active: false });

    const gone = await gw.user();
    assert.equal((await introspect(gone.access)).body.active, true);
    const deleted = await gw.call('DELETE', '/api/v1/auth/me', { headers: gone.headers });
    assert.equal(deleted.status, 200, JSON.stringify(deleted.body));
    assert.deepEqual((await introspect(gone.access)).body, { active: false });
  });

  it('answers inactive, and nothing more, for a forged, malformed or foreign token', async () => {
    const user = await gw.user();
    const [head, payload] = user.access.split('.');
    const tampered = `${head}.${Buffer.from(JSON.stringify({ ...JSON.parse(Buffer.from(payload!, 'base64url').toString()), tier: 'enterprise' })).toString('base64url')}.${user.access.split('.')[2]}`;
    for (const token of [tampered, 'not-a-jwt', `${head}.${payload}.`]) {
      const reply = await introspect(token);
      assert.equal(reply.status, 200);
      assert.deepEqual(reply.body, { active: false }, token.slice(0, 20));
    }
  });

  it('answers service tokens with scope service', async () => {
    const issued = await gw.call('POST', '/api/v1/auth/service-token', { headers: admin, body: { service: 'simulation', ttl_seconds: 600 } });
    assert.equal(issued.status, 201, JSON.stringify(issued.body));
    const reply = await introspect(issued.body.access_token);
    assert.equal(reply.body.active, true);
    assert.equal(reply.body.scope, 'service');
    assert.equal(reply.body.sub, 'service:simulation');
  });

  it('is for services only, and needs a token', async () => {
    const user = await gw.user();
    const anonymous = await introspect(user.access, {});
    assert.equal(anonymous.status, 401);
    assert.match(anonymous.headers.get('content-type') ?? '', /problem\+json/);
    assert.equal((await introspect(user.access, user.headers)).status, 403);
    const missing = await gw.call('POST', '/api/v1/auth/introspect', { headers: service, body: {} });
    assert.equal(missing.status, 422);
    assert.equal(missing.body.errors[0].path, 'body.token');
    const wrongKey = await introspect(user.access, { 'X-Service-Key': 'not-the-key-0123456789' });
    assert.equal(wrongKey.status, 401);
  });
});
