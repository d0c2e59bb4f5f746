import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type GenerationHarness, QUERY, serviceKey, startGeneration, user } from './harness.ts';

/**
 * Scene images as a web page meets them (docs/generation.md, "Images"): a public scene's image loads with
 * no credential and is cacheable (Cache-Control, a strong ETag, 304 on a conditional request); a private
 * scene's image is its owner's alone, and no shared cache keeps it.
 */
describe('generation: scene images', function () {
  this.timeout(30_000);
  let gen: GenerationHarness;
  const render = async (headers: Record<string, string>, body: Record<string, unknown> = {}) => {
    const reply = await gen.post('/api/v1/timepoints/generate/sync', { query: QUERY, generate_image: true, ...body }, headers);
    assert.equal(reply.status, 200, JSON.stringify(reply.body));
    assert.ok(reply.body.image_url, 'the offline provider draws an image');
    // image_url is absolute on PUBLIC_URL (here unset: GENERATION_URL's default port); the test server is elsewhere.
    const { pathname } = new URL(reply.body.image_url);
    assert.equal(pathname, `/api/v1/timepoints/${reply.body.id}/image`);
    return { id: reply.body.id as string, image_url: `${gen.url}${pathname}` };
  };
  const fetchImage = (url: string, headers: Record<string, string> = {}, method = 'GET') => fetch(url, { method, headers });

  before(async () => {
    gen = await startGeneration();
  });
  after(() => gen?.stop());

  it("serves an ownerless scene's image to anyone, cached for a year as immutable, with an ETag and 304s", async () => {
    const scene = await render(serviceKey);
    const first = await fetchImage(scene.image_url);
    assert.equal(first.status, 200);
    assert.match(first.headers.get('content-type')!, /^image\//);
    assert.equal(first.headers.get('cache-control'), 'public, max-age=31536000, immutable');
    const etag = first.headers.get('etag')!;
    assert.match(etag, /^"[A-Za-z0-9_-]{43}"$/, 'a strong validator: the SHA-256 of the bytes');
    const bytes = Buffer.from(await first.arrayBuffer());
    assert.ok(bytes.length > 0);
    assert.ok(first.headers.get('last-modified'));

    const again = await fetchImage(scene.image_url);
    assert.equal(again.headers.get('etag'), etag, 'the same URL always has the same bytes');
    assert.deepEqual(Buffer.from(await again.arrayBuffer()), bytes);

    const revalidated = await fetchImage(scene.image_url, { 'If-None-Match': etag });
    assert.equal(revalidated.status, 304);
    assert.equal(revalidated.headers.get('etag'), etag);
    assert.equal((await revalidated.arrayBuffer()).byteLength, 0);
    assert.equal(
      (await fetchImage(scene.image_url, { 'If-None-Match': `W/${etag}, "other"` })).status,
      304,
      'weak comparison, as RFC 9110 asks for If-None-Match',
    );
    assert.equal((await fetchImage(scene.image_url, { 'If-None-Match': '"something-else"' })).status, 200);
    assert.equal((await fetchImage(scene.image_url, { 'If-Modified-Since': first.headers.get('last-modified')! })).status, 304);

    const head = await fetchImage(scene.image_url, {}, 'HEAD');
    assert.equal(head.status, 200);
    assert.equal(head.headers.get('etag'), etag);
  });

  it("keeps an owned public scene's image in shared caches for an hour only: its owner may make it private", async () => {
    const scene = await render(user('olga'));
    const reply = await fetchImage(scene.image_url);
    assert.equal(reply.status, 200);
    assert.equal(reply.headers.get('cache-control'), 'public, max-age=3600');
    const etag = reply.headers.get('etag')!;

    assert.equal((await gen.send('PATCH', `/api/v1/timepoints/${scene.id}`, { visibility: 'private' }, user('olga'))).status, 200);
    assert.equal((await fetchImage(scene.image_url)).status, 404, 'gone from the origin at once');
    assert.equal((await fetchImage(scene.image_url, { 'If-None-Match': etag })).status, 404, 'a cache revalidating it learns it is gone');
  });

  it("serves a private scene's image to its owner only, never to a shared cache", async () => {
    const scene = await render(user('pia'), { visibility: 'private' });
    for (const headers of [{}, user('quinn'), serviceKey]) assert.equal((await fetchImage(scene.image_url, headers)).status, 404, JSON.stringify(headers));
    const own = await fetchImage(scene.image_url, user('pia'));
    assert.equal(own.status, 200);
    assert.equal(own.headers.get('cache-control'), 'private, no-cache');
    const etag = own.headers.get('etag')!;
    assert.equal((await fetchImage(scene.image_url, { ...user('pia'), 'If-None-Match': etag })).status, 304);
    assert.equal((await fetchImage(scene.image_url, { 'If-None-Match': etag })).status, 404, 'a validator is no credential');
  });

  it("serves the bytes on the embedded database too (npm start's), not a JSON rendering of them", async () => {
    const dataDir = await mkdtemp(join(tmpdir(), 'tempora-generation-'));
    const embedded = await startGeneration({ DATABASE_URL: '', TEMPORA_DATA_DIR: dataDir });
    try {
      const reply = await embedded.post('/api/v1/timepoints/generate/sync', { query: QUERY, generate_image: true }, serviceKey);
      const image = await fetch(`${embedded.url}${new URL(reply.body.image_url).pathname}`);
      assert.equal(image.status, 200);
      assert.equal(image.headers.get('content-type'), 'image/svg+xml');
      assert.match(await image.text(), /^<svg /);
    } finally {
      await embedded.stop();
      await rm(dataDir, { recursive: true, force: true });
    }
  });

  it('answers 404 for a scene without an image, and 422 for an id that is not one', async () => {
    const reply = await gen.post('/api/v1/timepoints/generate/sync', { query: QUERY }, serviceKey);
    assert.equal((await fetchImage(`${gen.url}/api/v1/timepoints/${reply.body.id}/image`)).status, 404);
    assert.equal((await fetchImage(`${gen.url}/api/v1/timepoints/nope/image`)).status, 422);
  });
});
