import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { AccountDeletionSchema, AccountExportPageSchema, encodeExportCursor } from '@tempora/kit/http';
import { waitFor } from '../../../test/support/wait.ts';
import type { SceneRecord } from '../src/scene.ts';
import { fakeVendorSuite, type GenerationHarness, QUERY, serviceKey, startGeneration, user, userId } from './harness.ts';

const SECRET = 'callback-secret-0123456789';
const data = (name: string, query = '') => `/api/v1/users/${userId(name)}/data${query}`;

/** Every page of a user's export, following next_cursor from the first. */
async function exportAll(gen: GenerationHarness, userId: string, limit?: number) {
  const pages = [];
  let cursor: string | null | undefined;
  do {
    const params = new URLSearchParams();
    if (cursor) params.set('cursor', cursor);
    if (limit) params.set('limit', String(limit));
    const reply = await gen.get(data(userId, `?${params}`), serviceKey);
    assert.equal(reply.status, 200, JSON.stringify(reply.body));
    const page = AccountExportPageSchema.parse(reply.body);
    pages.push(page);
    cursor = page.next_cursor;
    assert.ok(pages.length < 100, 'the export ends');
  } while (cursor);
  return pages;
}

describe('generation: account data (deletion and export for the gateway)', function () {
  this.timeout(60_000);
  let gen: GenerationHarness;
  let template: SceneRecord;
  const make = async (headers: Record<string, string>, body: Record<string, unknown> = {}) => {
    const reply = await gen.post('/api/v1/timepoints/generate/sync', { query: QUERY, ...body }, headers);
    assert.equal(reply.status, 200, JSON.stringify(reply.body));
    return reply.body as SceneRecord;
  };
  const submit = async (headers: Record<string, string>, key?: string) => {
    const reply = await gen.post('/api/v1/timepoints/generate', { query: QUERY }, { ...headers, ...(key ? { 'Idempotency-Key': key } : {}) });
    assert.equal(reply.status, 202, JSON.stringify(reply.body));
    return reply;
  };
  const finished = (jobId: string, userId: string) =>
    waitFor('the job to complete', async () => {
      const job = await gen.get(`/api/v1/timepoints/jobs/${jobId}`, user(userId));
      return job.body.status === 'completed' && job.body;
    });

  before(async () => {
    gen = await startGeneration();
    template = await make(user('template'));
  });
  after(() => gen.stop());

  it('refuses anyone but a service acting as itself, on both routes', async () => {
    for (const method of ['GET', 'DELETE']) {
      assert.equal((await gen.send(method, data('gina'))).status, 401, `${method} without a key`);
      assert.equal((await gen.send(method, data('gina'), undefined, { 'X-Service-Key': 'wrong' })).status, 401, `${method} with a wrong key`);
      const asUser = await gen.send(method, data('gina'), undefined, user('gina'));
      assert.equal(asUser.status, 403, `${method} as the user the gateway forwards`);
      assert.equal(asUser.headers.get('content-type'), 'application/problem+json');
    }
  });

  it('deletes every scene, job and Idempotency-Key record of the user, says how many, and a second call answers zeros', async () => {
    const privateScene = await make(user('gina'), { visibility: 'private' });
    const publicScene = await make(user('gina'));
    const other = await make(user('hank'));
    const job = await submit(user('gina'), 'order-1');
    const done = await finished(job.body.job_id, 'gina');
    const otherJob = await submit(user('hank'), 'order-1');
    await finished(otherJob.body.job_id, 'hank');

    const first = await gen.send('DELETE', data('gina'), undefined, serviceKey);
    assert.equal(first.status, 200, JSON.stringify(first.body));
    assert.deepEqual(AccountDeletionSchema.parse(first.body), {
      service: 'generation',
      deleted: { timepoints: 3, images: 0, jobs: 1, idempotency_keys: 1 },
      kept: {},
      notes: [],
    });
    for (const id of [privateScene.id, publicScene.id, done.timepoint_id])
      assert.equal((await gen.get(`/api/v1/timepoints/${id}`, user('gina'))).status, 404, id);
    assert.equal((await gen.get(`/api/v1/timepoints/jobs/${job.body.job_id}`, serviceKey)).status, 404);
    assert.equal((await gen.get('/api/v1/users/me/timepoints', user('gina'))).body.total, 0);
    // The key is free again: a new request with it is a new job, not a replay of the deleted one. Coming
    // for a user deleted minutes ago, its scene is refused (the hold against generations in flight).
    const again = await submit(user('gina'), 'order-1');
    assert.notEqual(again.body.job_id, job.body.job_id);
    assert.equal(again.headers.get('idempotent-replayed'), null);
    const refused = await waitFor('the job to fail', async () => {
      const status = await gen.get(`/api/v1/timepoints/jobs/${again.body.job_id}`, user('gina'));
      return status.body.status === 'failed' && status.body;
    });
    assert.match(refused.error.detail, /account was deleted/);
    assert.deepEqual((await gen.send('DELETE', data('gina'), undefined, serviceKey)).body.deleted, { timepoints: 0, images: 0, jobs: 1, idempotency_keys: 1 });

    const second = await gen.send('DELETE', data('gina'), undefined, serviceKey);
    assert.equal(second.status, 200);
    assert.deepEqual(second.body.deleted, { timepoints: 0, images: 0, jobs: 0, idempotency_keys: 0 });
    // Nobody else's data is touched.
    assert.equal((await gen.get(`/api/v1/timepoints/${other.id}`)).status, 200);
    assert.equal((await gen.get(`/api/v1/timepoints/jobs/${otherJob.body.job_id}`, user('hank'))).status, 200);
    const replay = await submit(user('hank'), 'order-1');
    assert.equal(replay.headers.get('idempotent-replayed'), 'true');
  });

  it('a scene of the user finished after the deletion (on any replica) is not stored, for as long as a generation may run', async () => {
    const { repository } = gen.instance;
    const scene = (owner: string): SceneRecord => ({ ...template, id: randomUUID(), owner: userId(owner) });
    assert.equal((await gen.send('DELETE', data('late'), undefined, serviceKey)).status, 200);
    assert.equal(await repository.timepoints.insert(scene('late'), null), false, 'refused right after the deletion');
    assert.equal(await repository.timepoints.insert(scene('someone-else'), null), true);
    assert.equal(await repository.timepoints.insert({ ...scene('late'), owner: null }, null), true, "ownerless scenes are not the user's");
    assert.equal((await gen.get('/api/v1/users/me/timepoints', user('late'))).body.total, 0);
    // Once the hold lapses the id is an id like any other (and the lapsed marker goes at the next deletion).
    await repository.erasures.erase(userId('brief'), 0);
    assert.equal(await repository.timepoints.insert(scene('brief'), null), true);
    await repository.erasures.erase(userId('anyone'), 60_000);
    const { knex } = gen.instance;
    const lapsed = await knex('generation_erasures').where('until', '<=', knex.fn.now()).count<{ count: string }[]>({ count: '*' });
    assert.equal(Number(lapsed[0]!.count), 0);
  });

  it('exports the full scene records, then the jobs with their request and Idempotency-Key', async () => {
    const privateScene = await make(user('ivy'), { visibility: 'private', request_context: { ticket: 3 } });
    const job = await submit(user('ivy'), 'export-1');
    const done = await finished(job.body.job_id, 'ivy');
    const pages = await exportAll(gen, 'ivy');
    assert.deepEqual(
      pages.map((page) => [page.kind, page.items.length]),
      [
        ['timepoints', 2],
        ['jobs', 1],
      ],
    );
    const stored = (await gen.get(`/api/v1/timepoints/${privateScene.id}`, user('ivy'))).body;
    assert.deepEqual(
      pages[0]!.items.find((item) => item.id === privateScene.id),
      stored,
      'as the scene route answers it',
    );
    assert.deepEqual(pages[0]!.items.map((item) => item.id).sort(), [privateScene.id, done.timepoint_id].sort());
    const exported = pages[1]!.items[0]!;
    assert.equal(exported.job_id, job.body.job_id);
    assert.equal(exported.status, 'completed');
    assert.equal(exported.idempotency_key, 'export-1');
    assert.equal((exported.request as { query: string }).query, QUERY);
    assert.equal(pages.at(-1)!.next_cursor, null);
    // A user with nothing: two empty pages, then the end.
    assert.deepEqual(
      (await exportAll(gen, 'nobody')).map((page) => [page.kind, page.items.length]),
      [
        ['timepoints', 0],
        ['jobs', 0],
      ],
    );
  });

  it('pages 2,500 scenes of one creation time without loss or duplicate, by id', async () => {
    const { repository } = gen.instance;
    const ids = new Set<string>();
    for (let batch = 0; batch < 50; batch += 1) {
      await Promise.all(
        Array.from({ length: 50 }, () => {
          const id = randomUUID();
          ids.add(id);
          return repository.timepoints.insert({ ...template, id, owner: userId('many') }, null);
        }),
      );
    }
    const pages = await exportAll(gen, 'many', 500);
    const scenes = pages.filter((page) => page.kind === 'timepoints');
    assert.deepEqual(
      scenes.map((page) => page.items.length),
      [500, 500, 500, 500, 500],
    );
    const seen = scenes.flatMap((page) => page.items.map((item) => item.id as string));
    assert.equal(seen.length, 2500);
    assert.equal(new Set(seen).size, 2500, 'no duplicate');
    assert.deepEqual(new Set(seen), ids, 'no loss');
    assert.deepEqual(seen, [...seen].sort(), 'one creation time: by id');
    assert.ok(
      scenes.every((page) => page.items.every((item) => item.owner === userId('many') && Array.isArray(item.characters))),
      'full scene records',
    );
    // The default page is 200: the same scenes in 13 pages.
    const defaults = (await exportAll(gen, 'many')).filter((page) => page.kind === 'timepoints');
    assert.equal(defaults.length, 13);
    assert.deepEqual(
      defaults.flatMap((page) => page.items.map((item) => item.id)),
      seen,
    );
    assert.equal((await gen.send('DELETE', data('many'), undefined, serviceKey)).body.deleted.timepoints, 2500);
  });

  it('pages each kind oldest first, then by id, each row once where rows share a creation time', async () => {
    const { knex, repository } = gen.instance;
    // The ids of `kind` in `name`'s export, two to a page: a page ends inside the rows sharing a microsecond.
    const exported = async (name: string, kind: string) =>
      (await exportAll(gen, name, 2)).filter((page) => page.kind === kind).flatMap((page) => page.items.map((item) => item.id ?? item.job_id));
    const at = (microseconds: number) => `2026-03-01T00:00:00.${String(microseconds).padStart(6, '0')}Z`;
    const setTimes = (table: string, times: Array<[string, string]>) =>
      Promise.all(times.map(([id, time]) => knex(table).where({ id }).update({ created_at: time })));

    // Ids a < b < c < d < e; by time e comes first, b last, and a, c, d share one microsecond.
    const scenes = Array.from({ length: 5 }, () => randomUUID()).sort();
    for (const id of scenes) assert.ok(await repository.timepoints.insert({ ...template, id, owner: userId('olga') }, null));
    const [a, b, c, d, e] = scenes as [string, string, string, string, string];
    await setTimes('timepoints', [
      [e, at(1)],
      [a, at(2)],
      [c, at(2)],
      [d, at(2)],
      [b, at(900)],
    ]);
    assert.deepEqual(await exported('olga', 'timepoints'), [e, a, c, d, b], 'by creation time, then by id, each once');

    const jobs: string[] = [];
    for (const key of ['order-1', 'order-2', 'order-3']) jobs.push((await submit(user('pete'), key)).body.job_id);
    for (const id of jobs) await finished(id, 'pete');
    const [x, y, z] = [...jobs].sort() as [string, string, string];
    await setTimes('generation_jobs', [
      [z, at(5)],
      [x, at(7)],
      [y, at(7)],
    ]);
    assert.deepEqual(await exported('pete', 'jobs'), [z, x, y], 'jobs likewise');

    // A cursor of the old form (an id alone) is a position this service no longer hands out.
    for (const kind of [0, 1]) {
      const old = encodeExportCursor({ kind, after: a });
      assert.equal((await gen.get(data('olga', `?cursor=${old}`), serviceKey)).status, 400, `kind ${kind}`);
    }
  });

  it('answers 400 to a cursor it did not issue, and 422 to a limit out of range', async () => {
    const bad = [
      'not-a-cursor',
      Buffer.from('{"kind":"x"}').toString('base64url'),
      encodeExportCursor({ kind: 2, after: '' }),
      encodeExportCursor({ kind: 0, after: "'; drop table timepoints; --" }),
      // Of the position's form, but no instant: PostgreSQL would refuse it as a timestamp.
      encodeExportCursor({ kind: 0, after: '2026-02-30T25:61:00.000000Z/aaaaaaaa-0000-4000-8000-000000000000' }),
      encodeExportCursor({ kind: 1, after: '2026-13-01T00:00:00.000000Z/aaaaaaaa-0000-4000-8000-000000000000' }),
    ];
    for (const cursor of bad) {
      const reply = await gen.get(data('ivy', `?cursor=${encodeURIComponent(cursor)}`), serviceKey);
      assert.equal(reply.status, 400, cursor);
      assert.equal(reply.headers.get('content-type'), 'application/problem+json');
    }
    for (const limit of ['0', '501', 'many']) assert.equal((await gen.get(data('ivy', `?limit=${limit}`), serviceKey)).status, 422, limit);
  });

  it('documents both routes with the contract schemas', async () => {
    const path = (await gen.get('/openapi.json')).body.paths['/api/v1/users/{user_id}/data'];
    assert.equal(path.delete.operationId, 'deleteUserData');
    assert.equal(path.get.operationId, 'exportUserData');
    assert.deepEqual(path.delete.security, [{ ServiceKey: [] }]);
    assert.equal(path.delete.responses['200'].content['application/json'].schema.$ref, '#/components/schemas/AccountDeletion');
    assert.equal(path.get.responses['200'].content['application/json'].schema.$ref, '#/components/schemas/AccountExportPage');
    assert.equal((await gen.get('/openapi.json')).body.paths['/api/v1/users/{user_id}/timepoints'], undefined, 'the old deletion route is gone');
  });
});

describe("generation: account deletion stops the user's generations in flight", function () {
  this.timeout(60_000);
  const { fake, gen } = fakeVendorSuite({ CALLBACK_SECRET: SECRET, CALLBACK_ALLOWLIST: '127.0.0.1' });
  let receiver: Server;
  let callbackUrl = '';
  const deliveries: string[] = [];

  before(async () => {
    receiver = createServer((request, response) => {
      const chunks: Buffer[] = [];
      request.on('data', (chunk) => chunks.push(chunk));
      request.on('end', () => {
        deliveries.push(Buffer.concat(chunks).toString());
        response.writeHead(204).end();
      });
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    callbackUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hooks`;
  });
  after(() => receiver.close());

  it('cancels a running async job and a sync request of the user; nothing is stored or called back afterwards', async () => {
    fake.latencyMs = 300;
    const job = await gen.post('/api/v1/timepoints/generate', { query: QUERY, callback_url: callbackUrl }, user('nora'));
    assert.equal(job.status, 202);
    const sync = gen.post('/api/v1/timepoints/generate/sync', { query: QUERY }, user('nora'));
    await waitFor('two calls at the vendor', async () => fake.requests.length >= 2);

    const deletion = await gen.send('DELETE', data('nora'), undefined, serviceKey);
    assert.equal(deletion.status, 200);
    assert.equal(deletion.body.deleted.jobs, 1);
    const deleted = Date.now();

    const syncReply = await sync;
    assert.equal(syncReply.status, 503, JSON.stringify(syncReply.body));
    assert.match(syncReply.body.detail, /account was deleted/);
    assert.ok(Date.now() - deleted < 1_000, 'answered at once, not when the pipeline would have ended');
    // "Never" has no event to wait on: a window as long as the rest of the pipeline would take is the test.
    await sleep(1_500);
    assert.ok(!fake.requests.some((call) => call.agent === 'Dialog'), 'the later agents never ran');
    assert.deepEqual(deliveries, [], 'no callback for a deleted job');
    assert.equal((await gen.get(`/api/v1/timepoints/jobs/${job.body.job_id}`, serviceKey)).status, 404, 'the job is not written back');
    assert.equal((await gen.get('/api/v1/users/me/timepoints', user('nora'))).body.total, 0);
    const again = await gen.send('DELETE', data('nora'), undefined, serviceKey);
    assert.deepEqual(again.body.deleted, { timepoints: 0, images: 0, jobs: 0, idempotency_keys: 0 });
  });
});
