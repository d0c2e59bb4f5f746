import assert from 'node:assert/strict';
import { SERVICE_KEY as GENERATION_SERVICE_KEY, type GenerationHarness, QUERY, startGeneration } from '../../generation/test/harness.ts';
import { type GatewayHarness, type SignedIn, startGateway } from './harness.ts';

/**
 * Scene images on the public host (docs/gateway.md, "Open paths"): the real generation service behind the
 * gateway, handing out image URLs on the public host (PUBLIC_URL, as the operator sets it to the Ingress). A public scene's image_url loads
 * with no credential and caches like a CDN's; a private scene's image is its owner's alone.
 */
const PUBLIC_HOST = 'https://tempora.test';

describe('gateway: scene images', function () {
  this.timeout(60_000);
  let generation: GenerationHarness;
  let gw: GatewayHarness;
  let owner: SignedIn;
  let other: SignedIn;

  before(async () => {
    generation = await startGeneration({ PUBLIC_URL: PUBLIC_HOST });
    gw = await startGateway({ GENERATION_URL: generation.url, GENERATION_SERVICE_KEY });
    [owner, other] = [await gw.user(), await gw.user()];
    await gw.grant(owner.userId, 100);
  });
  after(async () => {
    await gw?.stop();
    await generation?.stop();
  });

  const render = async (body: Record<string, unknown>) => {
    const reply = await gw.call('POST', '/api/v1/timepoints/generate/sync', {
      headers: owner.headers,
      body: { query: QUERY, generate_image: true, preset: 'hyper', ...body },
    });
    assert.equal(reply.status, 200, JSON.stringify(reply.body));
    assert.equal(reply.body.image_url, `${PUBLIC_HOST}/api/v1/timepoints/${reply.body.id}/image`);
    const { pathname } = new URL(reply.body.image_url);
    // The public host is this gateway.
    return { id: reply.body.id as string, image: `${gw.url}${pathname}` };
  };

  it("loads a public scene's image without a credential, cacheable, with 304s on conditional requests", async () => {
    const scene = await render({});
    const first = await fetch(scene.image);
    assert.equal(first.status, 200);
    assert.match(first.headers.get('content-type')!, /^image\//);
    assert.equal(first.headers.get('cache-control'), 'public, max-age=3600');
    const etag = first.headers.get('etag')!;
    assert.ok(etag && first.headers.get('last-modified'));
    assert.ok((await first.arrayBuffer()).byteLength > 0);
    assert.ok(first.headers.get('x-ratelimit-limit'), 'counted like any anonymous call');

    const conditional = await fetch(scene.image, { headers: { 'If-None-Match': etag } });
    assert.equal(conditional.status, 304);
    assert.equal(conditional.headers.get('etag'), etag);
    assert.equal((await fetch(scene.image, { method: 'HEAD' })).status, 200);
    assert.equal((await fetch(scene.image, { headers: other.headers })).status, 200, 'and with any credential');
  });

  it("keeps a private scene's image to its owner: 404 to anyone else, never stored by a shared cache", async () => {
    const scene = await render({ visibility: 'private' });
    assert.equal((await fetch(scene.image)).status, 404);
    assert.equal((await fetch(scene.image, { headers: other.headers })).status, 404);
    const own = await fetch(scene.image, { headers: owner.headers });
    assert.equal(own.status, 200);
    assert.equal(own.headers.get('cache-control'), 'private, no-cache');
    assert.equal((await fetch(scene.image, { headers: { 'If-None-Match': own.headers.get('etag')! } })).status, 404, 'a validator is no credential');
  });

  it('opens only the images: the scene itself and other methods still need a credential', async () => {
    const scene = await render({});
    assert.equal((await fetch(`${gw.url}/api/v1/timepoints/${scene.id}`)).status, 401);
    assert.equal((await fetch(scene.image, { method: 'DELETE' })).status, 401);
    assert.equal((await fetch(`${gw.url}/api/v1/timepoints/${scene.id}/image/extra`)).status, 401);
  });
});
