import assert from 'node:assert/strict';
import { admin, SERVICE_KEY as GATEWAY_SERVICE_KEY, type GatewayHarness, startGateway } from '../../gateway/test/harness.ts';
import { type SimulationHarness, startSimulation } from './harness.ts';

/** The gateway's access tokens at the simulation service: verified against its JWKS, revocation through its introspection. */
describe('simulation: gateway access tokens', function () {
  this.timeout(60_000);
  let gw: GatewayHarness;
  let sim: SimulationHarness;
  const bearer = (token: string) => ({ Authorization: `Bearer ${token}` });

  before(async () => {
    gw = await startGateway({ AUTH_CACHE_MS: '0' });
    sim = await startSimulation({ GATEWAY_URL: gw.url, GATEWAY_SERVICE_KEY: GATEWAY_SERVICE_KEY, INTROSPECTION_CACHE_MS: '300' });
  });
  after(async () => {
    await sim?.stop();
    await gw?.stop();
  });

  it('a signed-in user reads with their access token the runs the gateway started for them, but cannot start one unpaid', async () => {
    const user = await gw.user();
    const refused = await sim.call('POST', '/api/v1/simulate?wait=30', { headers: bearer(user.access), body: { template: 'tulip-mania', fidelity: 1 } });
    assert.equal(refused.status, 403, JSON.stringify(refused.body));
    assert.match(refused.body.detail, new RegExp(`paid: start it through the gateway at ${gw.url.replace(/[.]/g, '\\.')}/api/v1/simulate`));
    // As the gateway starts it once the user's credits are charged: its service key and the user's id.
    const started = await sim.run({ template: 'tulip-mania', fidelity: 1 }, user.userId, 30);
    assert.equal(started.status, 200, JSON.stringify(started.body));
    const list = await sim.call('GET', '/api/v1/simulations', { headers: bearer(user.access) });
    assert.deepEqual(
      list.body.items.map((item: any) => item.id),
      [started.body.id],
      'the same user id the gateway sends as X-User-ID; the refused start left no run',
    );
    assert.equal((await sim.call('GET', `/api/v1/simulations/${started.body.id}/result`, { headers: bearer(user.access) })).status, 200);
    assert.equal((await sim.call('GET', '/api/v1/simulations/budgets', { headers: bearer(user.access) })).status, 403, 'a user is not a service');
  });

  it('refuses a token whose user signed out, once the cached answer expires', async () => {
    const user = await gw.user();
    assert.equal((await sim.call('GET', '/api/v1/simulations', { headers: bearer(user.access) })).status, 200);
    assert.equal((await gw.call('POST', '/api/v1/auth/logout', { headers: user.headers, body: { refresh_token: user.refresh } })).status, 204);
    await new Promise((resolve) => setTimeout(resolve, 400));
    const refused = await sim.call('GET', '/api/v1/simulations', { headers: bearer(user.access) });
    assert.equal(refused.status, 401);
    assert.match(refused.body.detail, /revoked/);
    assert.match(refused.headers.get('www-authenticate') ?? '', /invalid_token/);
  });

  it('refuses a forged or malformed token without asking the gateway', async () => {
    const user = await gw.user();
    const [head, payload, signature] = user.access.split('.');
    const claims = JSON.parse(Buffer.from(payload!, 'base64url').toString());
    const forged = `${head}.${Buffer.from(JSON.stringify({ ...claims, sub: 'someone-else' })).toString('base64url')}.${signature}`;
    for (const token of [forged, 'not.a.jwt', `${head}.${payload}.`]) {
      const reply = await sim.call('GET', '/api/v1/simulations', { headers: bearer(token) });
      assert.equal(reply.status, 401, token.slice(0, 20));
    }
    const unsigned = `${Buffer.from(JSON.stringify({ alg: 'none', typ: 'JWT' })).toString('base64url')}.${payload}.`;
    assert.equal((await sim.call('GET', '/api/v1/simulations', { headers: bearer(unsigned) })).status, 401);
  });

  it('a service token acts as a service', async () => {
    const issued = await gw.call('POST', '/api/v1/auth/service-token', { headers: admin, body: { service: 'conductor', ttl_seconds: 600 } });
    const reply = await sim.call('GET', '/api/v1/simulations/budgets', { headers: bearer(issued.body.access_token) });
    assert.equal(reply.status, 200, JSON.stringify(reply.body));
    const started = await sim.call('POST', '/api/v1/simulate', { headers: bearer(issued.body.access_token), body: { template: 'tulip-mania', fidelity: 1 } });
    assert.equal(started.status, 202, `a service acting as itself starts runs: ${JSON.stringify(started.body)}`);
  });

  it('answers 503 with Retry-After when the gateway cannot say whether a valid token is still active', async () => {
    const user = await gw.user();
    const cut = await startSimulation({ GATEWAY_URL: gw.url, GATEWAY_SERVICE_KEY: 'not-the-gateway-key-0123', INTROSPECTION_CACHE_MS: '0' });
    try {
      const reply = await cut.call('GET', '/api/v1/simulations', { headers: bearer(user.access) });
      assert.equal(reply.status, 503);
      assert.equal(reply.headers.get('retry-after'), '5');
      assert.match(reply.body.detail, /gateway answered 401 when asked to check the access token/);
    } finally {
      await cut.stop();
    }
  });
});
