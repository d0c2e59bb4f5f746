import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { APPLE_WEBHOOK, asUser, type BillingHarness, STRIPE_WEBHOOK, service, useBilling } from './harness.ts';

const CHANNEL_ROUTES = [
  ['POST', APPLE_WEBHOOK],
  ['POST', '/api/v1/billing/apple/transactions'],
  ['POST', STRIPE_WEBHOOK],
  ['POST', '/api/v1/billing/checkout'],
] as const;

describe('billing without payment channels', function () {
  this.timeout(60_000);
  let h: BillingHarness;
  useBilling((harness) => (h = harness), { STRIPE_SECRET_KEY: '', STRIPE_WEBHOOK_SECRET: '', APPLE_ROOT_CERTIFICATES: '', APPLE_BUNDLE_ID: '' });

  it('answers an App Store notification with 404, not 5xx: the route is not mounted', async () => {
    const reply = await h.appleNotification(JSON.stringify({ signedPayload: 'a.b.c' }));
    assert.equal(reply.status, 404, JSON.stringify(reply.body));
    assert.equal(reply.headers.get('content-type'), 'application/problem+json');
    assert.equal(reply.body.status, 404);
  });

  it("mounts no route of an unconfigured channel, Stripe's included, whoever calls", async () => {
    const user = asUser(randomUUID());
    for (const [method, path] of CHANNEL_ROUTES) {
      for (const headers of [{}, user]) {
        const reply = await h.call(method, path, { headers: { ...headers, 'content-type': 'application/json' }, raw: '{}' });
        assert.equal(reply.status, 404, `${method} ${path}: ${JSON.stringify(reply.body)}`);
        assert.equal(reply.headers.get('content-type'), 'application/problem+json');
      }
    }
  });

  it('leaves them out of its OpenAPI document, and keeps the rest', async () => {
    const document = (await h.call('GET', '/openapi.json')).body as { paths: Record<string, unknown> };
    for (const [, path] of CHANNEL_ROUTES) assert.equal(document.paths[path], undefined, path);
    for (const path of [
      '/api/v1/billing/packs',
      '/api/v1/billing/plans',
      '/api/v1/billing/subscription',
      '/api/v1/billing/history',
      '/api/v1/billing/users/{user_id}',
    ]) {
      assert.ok(document.paths[path], path);
    }
    assert.doesNotMatch(JSON.stringify(document), /not configured/);
  });

  it('reports the channels as unconfigured in /health, which stays ok', async () => {
    const health = await h.call('GET', '/health');
    assert.equal(health.status, 200);
    assert.deepEqual(health.body.stripe, { checkout: false, webhooks: false });
    assert.equal(health.body.apple, false);
  });

  describe('the catalogue lists', () => {
    for (const [list, ids] of [
      ['packs', ['starter', 'explorer', 'historian']],
      ['plans', ['pro', 'enterprise']],
    ] as const) {
      it(`answers ${list} in the list envelope, honouring limit and offset`, async () => {
        const all = await h.call('GET', `/api/v1/billing/${list}`, { headers: service });
        assert.equal(all.status, 200);
        assert.deepEqual(Object.keys(all.body).sort(), ['items', 'limit', 'offset', 'total']);
        assert.deepEqual(
          all.body.items.map((item: { id: string }) => item.id),
          ids,
          'the whole catalogue by default',
        );
        assert.deepEqual([all.body.total, all.body.limit, all.body.offset], [ids.length, 100, 0]);

        const second = await h.call('GET', `/api/v1/billing/${list}?limit=1&offset=1`, { headers: asUser(randomUUID()) });
        assert.equal(second.status, 200);
        assert.deepEqual(second.body, { items: [all.body.items[1]], total: ids.length, limit: 1, offset: 1 });
        const past = await h.call('GET', `/api/v1/billing/${list}?offset=${ids.length}`, { headers: service });
        assert.deepEqual(past.body, { items: [], total: ids.length, limit: 100, offset: ids.length });

        for (const bad of ['limit=0', 'limit=101', 'limit=two', 'offset=-1']) {
          const refused = await h.call('GET', `/api/v1/billing/${list}?${bad}`, { headers: service });
          assert.equal(refused.status, 422, bad);
          assert.equal(refused.headers.get('content-type'), 'application/problem+json');
        }
      });
    }

    it('documents the envelope and its parameters', async () => {
      const document = (await h.call('GET', '/openapi.json')).body;
      for (const path of ['/api/v1/billing/packs', '/api/v1/billing/plans']) {
        const operation = document.paths[path].get;
        assert.deepEqual(
          operation.parameters.map((parameter: { name: string; in: string }) => `${parameter.in}:${parameter.name}`).sort(),
          ['query:limit', 'query:offset'],
          path,
        );
        const text = JSON.stringify(operation.responses['200']);
        const schema = text.includes('$ref')
          ? document.components.schemas[/#\/components\/schemas\/([^"]+)/.exec(text)![1]!]
          : operation.responses['200'].content['application/json'].schema;
        assert.deepEqual(Object.keys(schema.properties).sort(), ['items', 'limit', 'offset', 'total'], path);
      }
    });
  });
});
