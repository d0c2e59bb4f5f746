import assert from 'node:assert/strict';
import { openDatabase } from '@tempora/kit/data';
import { AccountDeletionSchema, AccountExportPageSchema, encodeExportCursor } from '@tempora/kit/http';
import { createLogger } from '@tempora/kit/observability';
import { request } from '../../../test/support/http.ts';
import { GenerateBody, queueGenerate } from '../src/routes/writes.ts';
import { ADMIN_KEY, type GraphHarness, serviceKey, startGraph, writer } from './harness.ts';

const ALICE = '7b0d2a4e-4a8f-4c1e-9d55-0f6a3c2b1e90';
const BOB = '0c4f5e1a-2b3d-4e6f-8a9b-1c2d3e4f5a6b';
const CAROL = '5d6e7f80-9a1b-4c2d-8e3f-4a5b6c7d8e9f';
const data = (userId: string, query = '') => `/api/v1/users/${encodeURIComponent(userId)}/data${query}`;

describe('graph: account data (deletion and export for the gateway)', function () {
  this.timeout(60_000);
  let h: GraphHarness;
  const send = (method: string, path: string, headers?: Record<string, string>) => request(h.url, path, { method, headers });
  /** A render job asked for by `requester`, queued as POST /generate queues one. */
  const queue = async (requester: string, index: number) => {
    const body = GenerateBody.parse({
      path: `/1900/january/${(index % 28) + 1}/1200/france/ile-de-france/paris/account-render-${index}`,
      event_name: `Account render ${index}`,
    });
    return (await queueGenerate(h.instance.graph, body, requester)).job;
  };
  const exportAll = async (userId: string, limit?: number) => {
    const pages = [];
    let cursor: string | null | undefined;
    do {
      const params = new URLSearchParams();
      if (cursor) params.set('cursor', cursor);
      if (limit) params.set('limit', String(limit));
      const reply = await h.get(data(userId, `?${params}`), serviceKey);
      assert.equal(reply.status, 200, JSON.stringify(reply.body));
      pages.push(AccountExportPageSchema.parse(reply.body));
      cursor = pages.at(-1)!.next_cursor;
      assert.ok(pages.length < 100, 'the export ends');
    } while (cursor);
    return pages;
  };

  before(async () => {
    // No renderer: jobs stay as the tests leave them.
    h = await startGraph({ GRAPH_WORKERS: 'none' });
  });
  after(() => h?.stop());

  it('refuses anyone but a service acting as itself, on both routes', async () => {
    for (const method of ['GET', 'DELETE']) {
      assert.equal((await send(method, data(ALICE))).status, 401, `${method} without a credential`);
      assert.equal((await send(method, data(ALICE), { 'X-Service-Key': 'wrong-key-0123456789' })).status, 401, `${method} with a wrong key`);
      const asUser = await send(method, data(ALICE), { ...serviceKey, 'X-User-ID': ALICE });
      assert.equal(asUser.status, 403, `${method} as the user the gateway forwards`);
      assert.equal(asUser.headers.get('content-type'), 'application/problem+json');
      assert.equal((await send(method, data(ALICE), writer)).status, 403, `${method} with a writer token`);
      assert.equal((await send(method, data(ALICE), { 'X-Admin-Key': ADMIN_KEY })).status, 403, `${method} with the admin key`);
    }
  });

  it("deletes every render job the user asked for, in any state, and nobody else's; the moments stay; a second call answers zero", async () => {
    const jobs = h.instance.graph.repository.renderJobs;
    const mine = [await queue(ALICE, 1), await queue(ALICE, 2), await queue(ALICE, 3)];
    const theirs = await queue(BOB, 4);
    const writers = await h.post(
      '/generate',
      { path: '/1900/january/5/1200/france/ile-de-france/paris/a-writers-render', event_name: "A writer's render" },
      writer,
    );
    assert.equal(writers.status, 202);
    const workers = await queue('expander', 6);
    // One of the user's jobs is running on a renderer, one has failed for good.
    const claimed = await jobs.claim('renderer-test', 100);
    assert.ok(claimed.some((job) => job.id === mine[0]!.id));
    assert.equal(await jobs.failAttempt(mine[1]!.id, 'renderer-test', 'scripted', 0, 0), 'failed');

    const first = await send('DELETE', data(ALICE), serviceKey);
    assert.equal(first.status, 200, JSON.stringify(first.body));
    assert.deepEqual(AccountDeletionSchema.parse(first.body), { service: 'graph', deleted: { render_jobs: 3 }, kept: {}, notes: [] });
    for (const job of mine) assert.equal((await h.get(`/api/v1/graph/jobs/${job.id}`, serviceKey)).status, 404, job.id);
    // The renderer that held the running job finds it gone: nothing is written back to the job or its moment.
    assert.equal(await jobs.complete(mine[0]!.id, 'renderer-test', 'scene-after-deletion'), false);
    assert.equal(await jobs.failAttempt(mine[0]!.id, 'renderer-test', 'late', 3, 0), undefined);
    assert.equal(await jobs.byId(mine[0]!.id), undefined);
    const moment = await h.get(`/api/v1/moments/${mine[0]!.path.slice(1)}`);
    assert.equal(moment.status, 200, 'the moment is public history and stays');
    for (const id of [theirs.id, writers.body.job.id, workers.id]) assert.equal((await h.get(`/api/v1/graph/jobs/${id}`, serviceKey)).status, 200, id);

    const second = await send('DELETE', data(ALICE), serviceKey);
    assert.equal(second.status, 200);
    assert.deepEqual(second.body.deleted, { render_jobs: 0 });
  });

  it('never takes a writer, service or worker for a user', async () => {
    for (const userId of ['expander', 'daily', 'writer:tester', 'service:abc']) {
      for (const method of ['GET', 'DELETE']) assert.equal((await send(method, data(userId), serviceKey)).status, 422, `${method} ${userId}`);
    }
  });

  it("pages the user's render jobs oldest first, without loss or duplicate", async () => {
    const queued = [];
    for (let index = 100; index < 125; index += 1) queued.push((await queue(BOB, index)).id);
    const ids = new Set([...queued]);
    const pages = await exportAll(BOB, 10);
    assert.deepEqual(
      pages.map((page) => [page.kind, page.items.length]),
      [
        ['render_jobs', 10],
        ['render_jobs', 10],
        ['render_jobs', 6],
      ],
      'the 25 jobs and the one of the earlier test',
    );
    const seen = pages.flatMap((page) => page.items.map((item) => item.id as string));
    assert.equal(new Set(seen).size, seen.length, 'no duplicate');
    for (const id of ids) assert.ok(seen.includes(id), `${id} exported`);
    assert.deepEqual(seen.slice(-25), queued, 'oldest first: in the order they were queued');
    const one = pages[0]!.items[0]!;
    assert.deepEqual(one, (await h.get(`/api/v1/graph/jobs/${one.id}`, serviceKey)).body, 'as the job route answers it');
    assert.equal(one.requested_by, BOB);
    // Everything on one default page; a user with nothing gets one empty page.
    assert.equal((await exportAll(BOB)).length, 1);
    assert.deepEqual(
      (await exportAll(ALICE)).map((page) => [page.kind, page.items.length, page.next_cursor]),
      [['render_jobs', 0, null]],
    );
  });

  it('pages render jobs sharing a creation time by id, each once, and refuses a cursor of the old form', async () => {
    const queued = [];
    for (let index = 200; index < 205; index += 1) queued.push((await queue(CAROL, index)).id);
    // Ids a < b < c < d < e; by time e comes first, b last, and a, c, d share one microsecond.
    const [a, b, c, d, e] = queued.sort() as [string, string, string, string, string];
    const at = (microseconds: number) => `2026-03-01T00:00:00.${String(microseconds).padStart(6, '0')}Z`;
    const times: Array<[string, string]> = [
      [e, at(1)],
      [a, at(2)],
      [c, at(2)],
      [d, at(2)],
      [b, at(900)],
    ];
    const database = await openDatabase({ service: 'graph', url: h.databaseUrl, dataDir: '', migrations: [], logger: createLogger('graph-test', 'silent') });
    try {
      await Promise.all(times.map(([id, time]) => database.knex('render_jobs').where({ id }).update({ created_at: time })));
    } finally {
      await database.close();
    }
    const pages = await exportAll(CAROL, 2);
    assert.deepEqual(
      pages.map((page) => page.items.map((item) => item.id)),
      [[e, a], [c, d], [b]],
      'by creation time, then by id, each once, a page ending among the rows sharing a microsecond',
    );
    const old = encodeExportCursor({ kind: 0, after: a });
    assert.equal((await h.get(data(CAROL, `?cursor=${old}`), serviceKey)).status, 400, 'an id alone is no longer a position');
  });

  it('answers 400 to a cursor it did not issue, and 422 to a limit out of range', async () => {
    for (const cursor of [
      'not-a-cursor',
      Buffer.from('[1]').toString('base64url'),
      encodeExportCursor({ kind: 1, after: '' }),
      encodeExportCursor({ kind: 0, after: 'x' }),
    ]) {
      const reply = await h.get(data(BOB, `?cursor=${encodeURIComponent(cursor)}`), serviceKey);
      assert.equal(reply.status, 400, cursor);
      assert.equal(reply.headers.get('content-type'), 'application/problem+json');
    }
    for (const limit of ['0', '501', 'all']) assert.equal((await h.get(data(BOB, `?limit=${limit}`), serviceKey)).status, 422, limit);
  });

  it('documents both routes with the contract schemas', async () => {
    const path = (await h.get('/openapi.json')).body.paths['/api/v1/users/{user_id}/data'];
    assert.equal(path.delete.operationId, 'deleteUserData');
    assert.equal(path.get.operationId, 'exportUserData');
    assert.deepEqual(path.get.security, [{ ServiceKey: [] }]);
    assert.equal(path.delete.responses['200'].content['application/json'].schema.$ref, '#/components/schemas/AccountDeletion');
    assert.equal(path.get.responses['200'].content['application/json'].schema.$ref, '#/components/schemas/AccountExportPage');
  });
});
