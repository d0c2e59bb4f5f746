import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import { ACCOUNT_SERVICES } from '../src/accounts/account-services.ts';
import { type GatewayHarness, useGateway } from './harness.ts';

/**
 * The export's lists in their documented order (docs/accounts.md, "Export"), whatever order the rows were
 * read or a service paged them in: oldest first, then by id, the items as the service sent them.
 */
describe('gateway: the export puts every list in a fixed order', function () {
  this.timeout(60_000);
  let gw: GatewayHarness;
  useGateway(
    (started) => {
      gw = started;
    },
    { resetUpstreams: true },
  );

  type Item = Record<string, unknown>;
  /** Serves `pages` (kind and items) in turn as one service's export, each page's cursor its index. */
  function serve(upstream: 'generation' | 'simulation', pages: { kind: string; items: Item[] }[], failAt?: number): void {
    gw.upstreams[upstream].on('GET /api/v1/users/*', (req, res: ServerResponse) => {
      const at = Number(new URL(req.url!, 'http://x').searchParams.get('cursor') ?? 0);
      if (at === failAt) return void res.writeHead(503).end();
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ service: upstream, ...pages[at], next_cursor: at + 1 < pages.length ? String(at + 1) : null }));
    });
  }
  const stagedRows = async () => Number((await gw.instance.knex('export_staging').count<{ count: string }[]>('* as count'))[0]!.count);

  it("orders a service's kind by creation time to the microsecond, then id, across its pages, and stages nothing after", async () => {
    const undated = { id: '55555555-0000-4000-8000-000000000000', title: 'no time' };
    const early = { title: 'early', id: 'aaaaaaaa-0000-4000-8000-000000000000', created_at: '2026-01-01T00:00:00.000001Z' };
    const lateHigh = { id: 'ffffffff-0000-4000-8000-000000000000', created_at: '2026-01-01T00:00:00.000002Z' };
    const lateLow = { id: '11111111-0000-4000-8000-000000000000', created_at: '2026-01-01T00:00:00.000002Z' };
    // Many more than one sorted read (500), with times shared by many, in the random order of their ids.
    const many = Array.from({ length: 1_200 }, (_, i) => ({ id: randomUUID(), created_at: `2026-02-0${1 + (i % 7)}T00:00:00.000Z` }));
    const byTimeThenId = (a: { id: string; created_at: string }, b: { id: string; created_at: string }) =>
      a.created_at.localeCompare(b.created_at) || (a.id < b.id ? -1 : 1);
    serve('generation', [
      { kind: 'timepoints', items: [lateHigh, early, ...many.slice(0, 600)] },
      { kind: 'timepoints', items: [lateLow, undated, ...many.slice(600)] },
      // Ids of digits sort as numbers, written as numbers or strings; `at` is the time of an item that records one moment.
      {
        kind: 'jobs',
        items: [
          { id: '10', at: '2026-03-01T00:00:00Z' },
          { id: 9, at: '2026-03-01T00:00:00Z' },
          { id: '11', at: '2026-02-28T00:00:00Z' },
        ],
      },
      // An item without `id` is named by its `job_id` (else its `key`).
      {
        kind: 'render_jobs',
        items: [
          { job_id: 'b', created_at: '2026-03-01T00:00:00Z' },
          { job_id: 'a', created_at: '2026-03-01T00:00:00Z' },
        ],
      },
    ]);
    const user = await gw.user();
    const reply = await gw.call('GET', '/api/v1/users/me/export', { headers: user.headers });
    assert.equal(reply.status, 200);
    assert.equal(reply.body.complete, true);
    const { timepoints, jobs, render_jobs } = reply.body.services.generation;
    assert.deepEqual(timepoints.slice(0, 4), [undated, early, lateLow, lateHigh]);
    assert.deepEqual(timepoints.slice(4), many.toSorted(byTimeThenId));
    assert.equal(JSON.stringify(timepoints[1]), JSON.stringify(early), 'each item as the service sent it, its keys in their order');
    assert.deepEqual(
      jobs.map((job: { id: number | string }) => job.id),
      ['11', 9, '10'],
    );
    assert.deepEqual(
      render_jobs.map((job: { job_id: string }) => job.job_id),
      ['a', 'b'],
    );
    assert.equal(await stagedRows(), 0, 'the stage is emptied');
  });

  it('writes out the ordered part of a service that fails midway, and names it', async () => {
    const later = { id: 'run-b', created_at: '2026-01-02T00:00:00Z' };
    const earlier = { id: 'run-c', created_at: '2026-01-01T00:00:00Z' };
    serve(
      'simulation',
      [
        { kind: 'runs', items: [later, earlier] },
        { kind: 'runs', items: [] },
      ],
      1,
    );
    const user = await gw.user();
    const reply = await gw.call('GET', '/api/v1/users/me/export', { headers: user.headers });
    assert.deepEqual(reply.body.services.simulation, { runs: [earlier, later] });
    assert.match(reply.body.errors.simulation, /simulation service answered 503/);
    assert.equal(reply.body.complete, false);
    assert.equal(await stagedRows(), 0);
  });

  it('ends an export whose account is deleted while it streams as incomplete, never a 500, and stages nothing', async () => {
    const user = await gw.user();
    let deleted = false;
    gw.upstreams.generation.on('GET /api/v1/users/*', async (req, res: ServerResponse) => {
      const at = Number(new URL(req.url!, 'http://x').searchParams.get('cursor') ?? 0);
      // Between the first page and the second, the account's deletion commits.
      if (at === 1 && !deleted) {
        await gw.instance.repository.deletions.record(user.userId, ACCOUNT_SERVICES);
        deleted = true;
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      const items = [{ id: randomUUID(), created_at: `2026-01-0${at + 1}T00:00:00Z` }];
      res.end(JSON.stringify({ service: 'generation', kind: 'timepoints', items, next_cursor: at < 2 ? String(at + 1) : null }));
    });
    const reply = await gw.call('GET', '/api/v1/users/me/export', { headers: user.headers });
    assert.equal(reply.status, 200, 'the document had begun');
    assert.ok(deleted);
    assert.equal(reply.body.complete, false);
    assert.deepEqual(
      reply.body.errors,
      Object.fromEntries(ACCOUNT_SERVICES.map((service) => [service, 'not exported: the account was deleted during the export'])),
    );
    // The page staged before the deletion went with the account; the services after it are not asked.
    assert.deepEqual(reply.body.services, { generation: { timepoints: [] }, graph: {}, simulation: {}, conductor: {}, billing: {} });
    assert.equal(await stagedRows(), 0);
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
