import assert from 'node:assert/strict';
import { TdfRecordSchema, tdfHash } from '@tempora/kit/moments';
import { scrape } from '../../kit/test/metrics-support.ts';
import { type GenerationHarness, QUERY, serviceKey, startGeneration, user } from './harness.ts';

describe('generation: stored scenes, visibility, owner list, TDF', function () {
  this.timeout(30_000);
  let gen: GenerationHarness;
  const make = async (headers: Record<string, string>, body: Record<string, unknown> = {}) => {
    const reply = await gen.post('/api/v1/timepoints/generate/sync', { query: QUERY, ...body }, headers);
    assert.equal(reply.status, 200, JSON.stringify(reply.body));
    return reply.body;
  };
  before(async () => {
    gen = await startGeneration();
  });
  after(() => gen.stop());

  it('private scenes are visible only to their owner (404 to everyone else, service key included)', async () => {
    const scene = await make(user('alice'), { visibility: 'private' });
    assert.equal((await gen.get(`/api/v1/timepoints/${scene.id}`, user('alice'))).status, 200);
    assert.equal((await gen.get(`/api/v1/timepoints/${scene.id}`, user('bob'))).status, 404);
    assert.equal((await gen.get(`/api/v1/timepoints/${scene.id}`)).status, 404);
    assert.equal((await gen.get(`/api/v1/timepoints/${scene.id}`, serviceKey)).status, 404);
    assert.equal((await gen.get(`/api/v1/timepoints/${scene.id}?format=tdf`, user('bob'))).status, 404);
    const open = await make(user('alice'));
    assert.equal((await gen.get(`/api/v1/timepoints/${open.id}`)).status, 200);
    assert.equal((await gen.get('/api/v1/timepoints/00000000-0000-4000-8000-000000000000')).status, 404);
    assert.equal((await gen.get('/api/v1/timepoints/not-a-uuid')).status, 422);
  });

  it('a private scene needs an owner', async () => {
    const reply = await gen.post('/api/v1/timepoints/generate/sync', { query: QUERY, visibility: 'private' });
    assert.equal(reply.status, 422);
    assert.equal(reply.body.errors[0].path, 'body.visibility');
  });

  it('the owner changes visibility both ways; others cannot', async () => {
    const scene = await make(user('carol'));
    const hidden = await gen.send('PATCH', `/api/v1/timepoints/${scene.id}`, { visibility: 'private' }, user('carol'));
    assert.equal(hidden.status, 200);
    assert.equal(hidden.body.visibility, 'private');
    assert.equal((await gen.get(`/api/v1/timepoints/${scene.id}`)).status, 404);
    assert.equal((await gen.send('PATCH', `/api/v1/timepoints/${scene.id}`, { visibility: 'public' }, user('dave'))).status, 404, 'invisible to non-owners');
    const shown = await gen.send('PATCH', `/api/v1/timepoints/${scene.id}`, { visibility: 'public' }, user('carol'));
    assert.equal(shown.body.visibility, 'public');
    assert.equal((await gen.get(`/api/v1/timepoints/${scene.id}`)).body.visibility, 'public');
    assert.equal((await gen.send('PATCH', `/api/v1/timepoints/${scene.id}`, { visibility: 'private' }, user('dave'))).status, 403);
    assert.equal((await gen.send('PATCH', `/api/v1/timepoints/${scene.id}`, { visibility: 'private' })).status, 401);
    assert.equal((await gen.send('PATCH', `/api/v1/timepoints/${scene.id}`, { visibility: 'hidden' }, user('carol'))).status, 422);
  });

  it("lists the owner's scenes (public and private, newest first) in the list envelope, on every alias", async () => {
    const first = await make(user('erin'));
    const second = await make(user('erin'), { visibility: 'private' });
    await make(user('frank'));
    for (const path of ['/api/v1/users/me/timepoints', '/users/me/timepoints', '/api/v1/timepoints']) {
      const list = await gen.get(path, user('erin'));
      assert.equal(list.status, 200, path);
      assert.equal(list.body.total, 2);
      assert.deepEqual(
        list.body.items.map((item: any) => item.id),
        [second.id, first.id],
      );
      assert.equal(list.body.limit, 20);
      assert.equal(list.body.offset, 0);
    }
    assert.equal(
      (await gen.get('/api/v1/users/me/timepoints?limit=5000', { ...user('erin'), ...serviceKey })).body.limit,
      100,
      'the export has its own route (account-data.test.ts)',
    );
    const page = await gen.get('/api/v1/users/me/timepoints?limit=1&offset=1', user('erin'));
    assert.deepEqual(
      page.body.items.map((item: any) => item.id),
      [first.id],
    );
    assert.equal((await gen.get('/api/v1/users/me/timepoints')).status, 401);
    assert.equal((await gen.get('/api/v1/users/me/timepoints', { 'X-User-ID': 'bad id with spaces' })).status, 401);
    for (const notAUserId of ['erin', 'user-7', 'admin']) {
      assert.equal(
        (await gen.get('/api/v1/users/me/timepoints', { ...serviceKey, 'X-User-ID': notAUserId })).status,
        401,
        `${notAUserId}: the gateway names users by UUID`,
      );
    }
  });

  it('the owner deletes one scene', async () => {
    const scene = await make(user('ivy'));
    assert.equal((await gen.send('DELETE', `/api/v1/timepoints/${scene.id}`, undefined, user('jack'))).status, 403);
    assert.equal((await gen.send('DELETE', `/api/v1/timepoints/${scene.id}`, undefined, user('ivy'))).status, 204);
    assert.equal((await gen.get(`/api/v1/timepoints/${scene.id}`)).status, 404);
  });

  it('?format=tdf returns the TDF envelope hashed with the shared RFC 8785 module', async () => {
    const scene = await make(user('kim'), { request_context: { secret: 'x' } });
    const reply = await gen.get(`/api/v1/timepoints/${scene.id}?format=tdf`);
    assert.equal(reply.status, 200);
    const tdf = reply.body;
    assert.equal(tdf.id, `timepoint:${scene.id}`);
    assert.equal(tdf.version, '1.0');
    assert.equal(tdf.source, 'tempora-generation');
    assert.equal(tdf.tdf_hash, tdfHash(tdf.payload));
    assert.equal(tdf.payload.title, scene.title);
    assert.equal(tdf.payload.owner, undefined);
    assert.equal(tdf.payload.request_context, undefined);
    assert.ok(tdf.entity_ids.some((id: string) => id.startsWith('place:')));
    assert.equal((await gen.get(`/api/v1/timepoints/${scene.id}?format=tdf`)).body.tdf_hash, tdf.tdf_hash, 'stable');
    // The envelope is what the document says it may answer (Schemathesis found it answered outside the Scene schema).
    assert.equal(TdfRecordSchema.safeParse(tdf).success, true);
    const documented = (await gen.get('/openapi.json')).body.paths['/api/v1/timepoints/{id}'].get.responses['200'].content['application/json'].schema;
    assert.deepEqual(documented.anyOf.map((s: { $ref: string }) => s.$ref).sort(), ['#/components/schemas/Scene', '#/components/schemas/TdfRecord']);
  });

  it('/health reports status, version 2.4.0, database and one boolean per provider; /openapi.json documents the routes', async () => {
    const health = await gen.get('/health');
    assert.equal(health.status, 200);
    assert.equal(health.body.status, 'ok');
    assert.equal(health.body.version, '2.4.0');
    assert.equal(health.body.database, true);
    assert.deepEqual(health.body.providers, { native: false, aggregator: false, image_vendor: false, free_image: false, offline: true });
    const openapi = await gen.get('/openapi.json');
    for (const path of [
      '/api/v1/timepoints/generate/sync',
      '/api/v1/timepoints/generate/stream',
      '/api/v1/timepoints/generate',
      '/api/v1/timepoints/jobs/{job_id}',
      '/api/v1/timepoints/{id}',
      '/api/v1/users/{user_id}/data',
    ])
      assert.ok(openapi.body.paths[path], path);
    const models = await gen.get('/api/v1/models');
    assert.equal(models.status, 200);
    assert.deepEqual(
      models.body.presets.map((preset: any) => preset.name),
      ['hyper', 'balanced', 'hd', 'gemini3'],
    );
    assert.ok(models.body.image_models.includes('stability/sd3.5-large-turbo'));
    const metrics = await scrape(gen);
    for (const name of ['generation_agent_duration_seconds', 'generation_agent_tokens_total', 'generation_agent_queue_depth'])
      assert.match(metrics, new RegExp(name));
    assert.match(metrics, /generation_agent_tokens_total\{[^}]*agent="Dialog"[^}]*provider="offline"/);
  });
});
