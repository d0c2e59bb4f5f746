/**
 * Who a request acts for (issue 21, "Who gets in"): one user's credential never reaches another user's
 * resources, through the gateway or directly; identity headers a client sends (X-User-ID, X-User-Tier,
 * X-Forwarded-*) are stripped at the gateway and not believed by a service reached without the service key.
 * Every operation with a path parameter is either a user-owned resource checked here or named as not
 * user-owned, so a new one fails the test until it is classified.
 */
import assert from 'node:assert/strict';
import { before, describe, it } from 'mocha';
import { listenStandIn } from '../support/http.ts';
import { waitFor } from '../support/wait.ts';
import { servicesBehind } from './behind-gateway.ts';
import { type SignedIn, signIn } from './credentials.ts';
import { ERROR_BODIES, SECRETS, type SecurityPlatform, securityPlatform } from './platform.ts';

/** Operations on one user's resource, by service:operationId: checked below against another user. */
const OWNED = new Set([
  'gateway:revokeApiKey',
  'generation:getTimepoint',
  'generation:getTimepointImage',
  'generation:setTimepointVisibility',
  'generation:deleteTimepoint',
  'generation:getJob',
  'simulation:getSimulation',
  'simulation:getSimulationResult',
  'simulation:streamSimulation',
  'simulation:cancelSimulation',
  'conductor:getConversation',
  'conductor:deleteConversation',
]);
/** Operations with a path parameter that is not one user's resource, and why. */
const NOT_OWNED: Record<string, string> = {
  'gateway:getUserBalance': 'service key only: any user, by id',
  'gateway:setUserTier': 'service or admin key only',
  'gateway:unlinkIdentity': "the caller's own identities under /auth/me: another account's identity is 404 there (services/gateway/test/identities.test.ts)",
  'generation:deleteUserData': "the gateway's account deletion (service key only)",
  'generation:exportUserData': "the gateway's account export (service key only)",
  'graph:deleteUserData': "the gateway's account deletion (service key only)",
  'graph:exportUserData': "the gateway's account export (service key only)",
  'simulation:deleteUserData': "the gateway's account deletion (service key only)",
  'simulation:exportUserData': "the gateway's account export (service key only)",
  'conductor:deleteUserData': "the gateway's account deletion (service key only)",
  'conductor:exportUserData': "the gateway's account export (service key only)",
  'billing:deleteUserData': "the gateway's account deletion (service key only)",
  'billing:exportUserData': "the gateway's account export (service key only)",
  'graph:getMoment': 'the public graph',
  'graph:traverse': 'the public graph (service key)',
  'graph:getRenderJob': "the graph's own render jobs (the writer that asked, an admin key, or the service key acting as itself)",
  'simulation:getSimulationBudget': 'budgets: a service acting as itself',
  'simulation:getSimulationTemplate': 'public templates',
  'billing:getUserBilling': 'operators (service or admin key)',
  'billing:resyncUserBilling': 'operators (service or admin key)',
};

interface Reply {
  status: number;
  body: any;
  headers: Headers;
}

async function call(base: string, method: string, path: string, headers: Record<string, string>, body?: unknown): Promise<Reply> {
  const response = await fetch(`${base}${path}`, {
    method,
    headers: { accept: 'application/json', ...headers, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    signal: AbortSignal.timeout(60_000),
  });
  const text = response.headers.get('content-type')?.includes('event-stream') ? '' : await response.text();
  if (!text) await response.body?.cancel().catch(() => {});
  if (response.status >= 400) ERROR_BODIES.push(`${response.status} ${text}`);
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    // not JSON: kept as text
  }
  return { status: response.status, body: parsed, headers: response.headers };
}

describe("security: identity (another user's resources, spoofed identity headers)", function () {
  this.timeout(300_000);
  let platform: SecurityPlatform;
  let gw: string;
  let alice: SignedIn;
  let bob: SignedIn;
  const as = (user: SignedIn, extra: Record<string, string> = {}) => ({ authorization: `Bearer ${user.access}`, ...extra });

  before(async function () {
    this.timeout(400_000);
    platform = await securityPlatform();
    gw = platform.urls.gateway;
    [alice, bob] = [await signIn(gw), await signIn(gw)];
  });

  it('classifies every operation with a path parameter as user-owned or not', async () => {
    const unclassified: string[] = [];
    const stale = new Set([...OWNED, ...Object.keys(NOT_OWNED)]);
    for (const service of ['gateway', 'generation', 'graph', 'simulation', 'conductor', 'billing'] as const) {
      const document = (await (await fetch(`${platform.urls[service]}/openapi.json`)).json()) as {
        paths: Record<string, Record<string, { operationId: string }>>;
      };
      for (const [path, item] of Object.entries(document.paths)) {
        for (const operation of Object.values(item)) {
          const key = `${service}:${operation.operationId}`;
          stale.delete(key);
          if (path.includes('{') && !OWNED.has(key) && !(key in NOT_OWNED)) unclassified.push(`${key} ${path}`);
        }
      }
    }
    assert.deepEqual(unclassified, [], 'operations on a path parameter that are neither OWNED nor NOT_OWNED');
    assert.deepEqual([...stale], [], 'entries that name no operation');
  });

  it("keeps a user's scenes and jobs from every other user, through the gateway", async () => {
    const job = await call(gw, 'POST', '/api/v1/timepoints/generate', as(bob), { query: 'The signing of the Magna Carta', visibility: 'private' });
    assert.equal(job.status, 202, JSON.stringify(job.body));
    const ended = async () => {
      const reply = await call(gw, 'GET', `/api/v1/timepoints/jobs/${job.body.job_id}`, as(bob));
      assert.equal(reply.status, 200, JSON.stringify(reply.body));
      return ['completed', 'failed'].includes(reply.body.status) && reply;
    };
    const state = await waitFor('the job to end', ended, { timeoutMs: 120_000, intervalMs: 500 });
    assert.equal(state.body.status, 'completed', JSON.stringify(state.body));
    const scene = state.body.timepoint_id as string;
    // Alice, also claiming to be Bob in every identity header the gateway might be fooled by.
    const spoofing = as(alice, { 'x-user-id': bob.id, 'x-user-tier': 'enterprise', 'x-forwarded-for': '10.0.0.1', 'x-forwarded-user': bob.id });
    for (const headers of [as(alice), spoofing]) {
      assert.equal((await call(gw, 'GET', `/api/v1/timepoints/jobs/${job.body.job_id}`, headers)).status, 404, 'job');
      assert.equal((await call(gw, 'GET', `/api/v1/timepoints/${scene}`, headers)).status, 404, 'private scene');
      assert.equal((await call(gw, 'GET', `/api/v1/timepoints/${scene}/image`, headers)).status, 404, 'private image');
      assert.equal((await call(gw, 'PATCH', `/api/v1/timepoints/${scene}`, headers, { visibility: 'public' })).status, 404, 'visibility');
      assert.equal((await call(gw, 'DELETE', `/api/v1/timepoints/${scene}`, headers)).status, 404, 'delete');
      const list = await call(gw, 'GET', '/api/v1/users/me/timepoints', headers);
      assert.equal(list.status, 200);
      assert.ok(!JSON.stringify(list.body).includes(scene), "Bob's scene in Alice's list");
    }
    // Made public, Alice may see it but still not change or delete it.
    assert.equal((await call(gw, 'PATCH', `/api/v1/timepoints/${scene}`, as(bob), { visibility: 'public' })).status, 200);
    assert.equal((await call(gw, 'GET', `/api/v1/timepoints/${scene}`, as(alice))).status, 200);
    assert.equal((await call(gw, 'PATCH', `/api/v1/timepoints/${scene}`, spoofing, { visibility: 'private' })).status, 403);
    assert.equal((await call(gw, 'DELETE', `/api/v1/timepoints/${scene}`, spoofing)).status, 403);
    assert.equal((await call(gw, 'DELETE', `/api/v1/timepoints/${scene}`, as(bob))).status, 204);
  });

  it("keeps a user's simulation runs and conductor conversations from every other user", async () => {
    const run = await call(gw, 'POST', '/api/v1/simulate', as(bob), { prompt: 'Two merchants haggle in Venice, 1450', fidelity: 1 });
    assert.ok(run.status === 201 || run.status === 202, JSON.stringify(run.body));
    const id = run.body.id as string;
    const spoofing = as(alice, { 'x-user-id': bob.id });
    for (const headers of [as(alice), spoofing]) {
      for (const path of [`/api/v1/simulations/${id}`, `/api/v1/simulations/${id}/result`, `/api/v1/simulations/${id}/events`]) {
        assert.equal((await call(gw, 'GET', path, headers)).status, 404, path);
      }
      assert.equal((await call(gw, 'POST', `/api/v1/simulations/${id}/cancel`, headers)).status, 404, 'cancel');
    }
    assert.equal((await call(gw, 'GET', `/api/v1/simulations/${id}`, as(bob))).status, 200);
    // Directly, with the simulation service's own user credential (the access token).
    assert.equal((await call(platform.urls.simulation, 'GET', `/api/v1/simulations/${id}`, as(alice))).status, 404);

    const message = await call(gw, 'POST', '/api/v1/conductor/messages', as(bob), { content: 'What happened on 20 July 1969?' });
    assert.equal(message.status, 200, JSON.stringify(message.body));
    const conversation = message.body.conversation_id as string;
    for (const base of [gw, platform.urls.conductor]) {
      assert.equal((await call(base, 'GET', `/api/v1/conductor/conversations/${conversation}`, as(alice))).status, 404, base);
      assert.equal((await call(base, 'DELETE', `/api/v1/conductor/conversations/${conversation}`, as(alice))).status, 404, base);
      assert.equal(
        (await call(base, 'POST', '/api/v1/conductor/messages', as(alice), { content: 'and then?', conversation_id: conversation })).status,
        404,
        base,
      );
    }
    // X-User-ID is believed only beside the service key: with Alice's token it is refused, never Bob.
    assert.equal(
      (await call(platform.urls.conductor, 'GET', `/api/v1/conductor/conversations/${conversation}`, as(alice, { 'x-user-id': bob.id }))).status,
      401,
    );
    assert.equal((await call(gw, 'GET', `/api/v1/conductor/conversations/${conversation}`, as(bob))).status, 200);
  });

  it("lets no user revoke another's API key", async () => {
    const created = await call(gw, 'POST', '/api/v1/users/me/api-keys', as(bob), { name: 'bobs', scopes: ['read'] });
    assert.equal(created.status, 201);
    assert.equal((await call(gw, 'DELETE', `/api/v1/users/me/api-keys/${created.body.id}`, as(alice, { 'x-user-id': bob.id }))).status, 404);
    const keys = await call(gw, 'GET', '/api/v1/users/me/api-keys', as(bob));
    assert.ok(keys.body.items.some((key: { id: string; revoked_at: string | null }) => key.id === created.body.id && key.revoked_at === null));
  });

  it('strips X-User-Tier at the gateway: a free user claiming enterprise keeps the free limits', async () => {
    const plain = await call(gw, 'GET', '/api/v1/credits/balance', as(alice));
    const claiming = await call(gw, 'GET', '/api/v1/credits/balance', as(alice, { 'x-user-tier': 'enterprise', 'x-user-id': bob.id }));
    assert.equal(claiming.status, 200);
    assert.equal(claiming.headers.get('x-ratelimit-limit'), plain.headers.get('x-ratelimit-limit'));
    assert.equal(claiming.body.balance, plain.body.balance);
  });

  it('gets the same answer to the same credential from every service behind the gateway (conductor, simulation, generation)', async () => {
    const leaving = await signIn(gw);
    assert.equal((await call(gw, 'POST', '/api/v1/auth/logout', as(leaving), {})).status, 204);
    const key = { 'x-service-key': SECRETS.serviceKey };
    // A user operation of each: what the user reads of their own.
    const reads = { conductor: '/api/v1/conductor/settings', simulation: '/api/v1/simulations', generation: '/api/v1/users/me/timepoints' } as const;
    const cases: Array<[string, Record<string, string>, number]> = [
      ['X-User-ID without a service key', { 'x-user-id': alice.id }, 401],
      ['X-User-ID and X-User-Tier without a service key', { 'x-user-id': alice.id, 'x-user-tier': 'enterprise' }, 401],
      ['X-User-ID that is not a user id (a UUID), beside the key', { ...key, 'x-user-id': 'admin' }, 401],
      ['X-User-ID that is not a user id, with a wrong key', { 'x-service-key': `${SECRETS.serviceKey}x`, 'x-user-id': 'user-7' }, 401],
      ["the user's access token with another's X-User-ID, no key", as(alice, { 'x-user-id': bob.id }), 401],
      ["the key, the user's token and another user's X-User-ID", as(alice, { ...key, 'x-user-id': bob.id }), 401],
      ['a signed-out access token (introspection)', as(leaving), 401],
      ['an Authorization that is not Bearer', { authorization: 'Basic YWxpY2U6c2VjcmV0' }, 401],
      ['the key naming the user', { ...key, 'x-user-id': alice.id }, 200],
      ["the user's own access token", as(alice), 200],
    ];
    const differing: string[] = [];
    for (const [label, headers, expected] of cases) {
      const answers: Record<string, number> = {};
      for (const [service, path] of Object.entries(reads)) {
        const reply = await call(platform.urls[service as keyof typeof reads], 'GET', path, headers);
        answers[service] = reply.status;
        if (reply.status === 401) assert.ok(reply.headers.get('www-authenticate'), `${service} ${label}: a 401 names its scheme`);
      }
      if (Object.values(answers).some((status) => status !== expected))
        differing.push(`${label}: expected ${expected} from each, got ${JSON.stringify(answers)}`);
    }
    assert.deepEqual(differing, []);
  });

  it('answers 503 with Retry-After from every service behind the gateway when the gateway cannot say whether a token is active', async function () {
    this.timeout(120_000);
    // The gateway's real key set, and an introspection that fails; then no gateway at all.
    const jwks = await (await fetch(`${gw}/.well-known/jwks.json`)).text();
    const standIn = await listenStandIn((request, response) => {
      if (request.url === '/.well-known/jwks.json') response.writeHead(200, { 'content-type': 'application/json' }).end(jwks);
      else response.writeHead(500).end('introspection is down');
    });
    const trio = await servicesBehind(standIn.url);
    try {
      const reads = { conductor: '/api/v1/conductor/settings', simulation: '/api/v1/simulations', generation: '/api/v1/users/me/timepoints' } as const;
      for (const stage of ['introspection failing', 'gateway unreachable']) {
        if (stage === 'gateway unreachable') await standIn.stop();
        for (const [service, path] of Object.entries(reads)) {
          const reply = await call(trio.urls[service as keyof typeof reads], 'GET', path, as(alice));
          assert.equal(reply.status, 503, `${service}, ${stage}: ${JSON.stringify(reply.body)}`);
          assert.equal(reply.headers.get('retry-after'), '5', `${service}, ${stage}`);
        }
      }
    } finally {
      await trio.stop();
      await standIn.stop().catch(() => {});
    }
  });

  it('believes X-User-ID at no service reached directly without the service key', async () => {
    const claim = { 'x-user-id': alice.id, 'x-user-tier': 'enterprise' };
    const cases: Array<[string, string, string, unknown?]> = [
      [platform.urls.generation, 'GET', '/api/v1/users/me/timepoints'],
      [platform.urls.generation, 'POST', '/api/v1/timepoints/generate', { query: 'The fall of Constantinople', visibility: 'private' }],
      [platform.urls.simulation, 'GET', '/api/v1/simulations'],
      [platform.urls.conductor, 'GET', '/api/v1/conductor/settings'],
      [platform.urls.billing, 'GET', '/api/v1/billing/subscription'],
      [platform.urls.graph, 'GET', '/browse'],
    ];
    for (const [base, method, path, body] of cases) {
      const reply = await call(base, method, path, claim, body);
      assert.equal(reply.status, 401, `${method} ${base}${path}: ${JSON.stringify(reply.body)}`);
      // With the key, the same claim is the gateway's and is believed.
      const keyed = await call(base, method, path, { ...claim, 'x-service-key': SECRETS.serviceKey }, body);
      assert.ok(keyed.status < 400 || keyed.status === 404, `${method} ${base}${path} with the key: ${keyed.status} ${JSON.stringify(keyed.body)}`);
    }
  });
});
