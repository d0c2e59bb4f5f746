import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import { ACCOUNT_SERVICES } from '../src/accounts/account-services.ts';
import { type GatewayHarness, useGateway } from './harness.ts';

/**
 * The export document around the services' parts (docs/accounts.md, "Export"): each service pages its kinds
 * oldest first, and the gateway writes the pages out as they come, never holding or re-sorting a kind; its
 * own lists are oldest first, then by id.
 */
describe('gateway: the export document', function () {
  this.timeout(60_000);
  let gw: GatewayHarness;
  useGateway(
    (started) => {
      gw = started;
    },
    { resetUpstreams: true },
  );

  type Item = Record<string, unknown>;
  /** Serves `pages` (kind and items) in turn as one service's export, each page's cursor its index; `before` runs first. */
  function serve(
    upstream: 'generation' | 'simulation',
    pages: { kind: string; items: Item[] }[],
    before?: (at: number, res: ServerResponse) => Promise<boolean>,
  ) {
    gw.upstreams[upstream].on('GET /api/v1/users/*', async (req, res: ServerResponse) => {
      const at = Number(new URL(req.url!, 'http://x').searchParams.get('cursor') ?? 0);
      if (before && !(await before(at, res))) return;
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ service: upstream, ...pages[at], next_cursor: at + 1 < pages.length ? String(at + 1) : null }));
    });
  }

  it("writes a service's pages as they come: kinds in their order, items unchanged, across pages and empty pages", async () => {
    const many = Array.from({ length: 1_200 }, (_, i) => ({ id: randomUUID(), n: i }));
    serve('generation', [
      { kind: 'timepoints', items: many.slice(0, 600) },
      { kind: 'timepoints', items: [] },
      { kind: 'timepoints', items: many.slice(600) },
      { kind: 'jobs', items: [{ title: 'keys in their order', id: 'b' }] },
      { kind: 'jobs', items: [{ id: 'a' }] },
      { kind: 'end', items: [] },
    ]);
    const user = await gw.user();
    const reply = await gw.call('GET', '/api/v1/users/me/export', { headers: user.headers });
    assert.equal(reply.status, 200);
    assert.equal(reply.body.complete, true);
    assert.deepEqual(reply.body.services.generation, { timepoints: many, jobs: [{ title: 'keys in their order', id: 'b' }, { id: 'a' }] });
    assert.deepEqual(Object.keys(reply.body.services.generation.jobs[0]), ['title', 'id'], 'each item as the service sent it');
  });

  it('writes out the part of a service that fails midway, and names it', async () => {
    const earlier = { id: 'run-c', created_at: '2026-01-01T00:00:00Z' };
    const later = { id: 'run-b', created_at: '2026-01-02T00:00:00Z' };
    serve(
      'simulation',
      [
        { kind: 'runs', items: [earlier, later] },
        { kind: 'runs', items: [] },
      ],
      async (at, res) => {
        if (at !== 1) return true;
        res.writeHead(503).end();
        return false;
      },
    );
    const user = await gw.user();
    const reply = await gw.call('GET', '/api/v1/users/me/export', { headers: user.headers });
    assert.deepEqual(reply.body.services.simulation, { runs: [earlier, later] });
    assert.match(reply.body.errors.simulation, /simulation service answered 503/);
    assert.equal(reply.body.complete, false);
  });

  it('ends an export whose account is deleted while it streams as incomplete, never a 500', async () => {
    const user = await gw.user();
    const first = { id: randomUUID() };
    let deleted = false;
    serve(
      'generation',
      [
        { kind: 'timepoints', items: [first] },
        { kind: 'timepoints', items: [{ id: randomUUID() }] },
        { kind: 'jobs', items: [{ id: randomUUID() }] },
      ],
      async (at) => {
        // Between the first page and the second, the account's deletion commits.
        if (at === 1 && !deleted) {
          await gw.instance.repository.deletions.record(user.userId, ACCOUNT_SERVICES);
          deleted = true;
        }
        return true;
      },
    );
    const reply = await gw.call('GET', '/api/v1/users/me/export', { headers: user.headers });
    assert.equal(reply.status, 200, 'the document had begun');
    assert.ok(deleted);
    assert.equal(reply.body.complete, false);
    assert.deepEqual(
      reply.body.errors,
      Object.fromEntries(ACCOUNT_SERVICES.map((service) => [service, 'not exported: the account was deleted during the export'])),
    );
    // What was written before the deletion stays; nothing after it is asked for.
    assert.deepEqual(reply.body.services, { generation: { timepoints: [first] }, graph: {}, simulation: {}, conductor: {}, billing: {} });
  });

  it("orders the gateway's own lists oldest first, then by id, when their times are the same", async () => {
    const user = await gw.user();
    for (const name of ['one', 'two', 'three'])
      assert.equal((await gw.call('POST', '/api/v1/users/me/api-keys', { headers: user.headers, body: { name } })).status, 201);
    await gw.instance
      .knex('api_keys')
      .where({ user_id: user.userId })
      .update({ created_at: new Date('2026-01-01T00:00:00Z') });
    const ids = (await gw.instance.knex('api_keys').where({ user_id: user.userId }).pluck('id')) as string[];
    const reply = await gw.call('GET', '/api/v1/users/me/export', { headers: user.headers });
    assert.deepEqual(
      reply.body.api_keys.map((key: { id: string }) => key.id),
      ids.toSorted(),
    );
  });
});
