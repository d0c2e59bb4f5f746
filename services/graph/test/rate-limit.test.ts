import assert from 'node:assert/strict';
import { startGraph, serviceKey, writer, type GraphHarness } from './harness.ts';
import { record } from './fixtures.ts';

describe('graph rate limits', function () {
  this.timeout(30_000);
  let h: GraphHarness;
  before(async () => {
    h = await startGraph({ RATE_LIMIT_PUBLIC_PER_MINUTE: '3', RATE_LIMIT_READ_PER_MINUTE: '5', RATE_LIMIT_WRITE_PER_MINUTE: '2' });
  });
  after(() => h?.stop());

  it('reports the limit on every response and answers 429 with Retry-After when exceeded (public, per IP)', async () => {
    const remaining: string[] = [];
    for (let i = 0; i < 3; i += 1) {
      const reply = await h.get('/api/v1/stats');
      assert.equal(reply.status, 200);
      assert.equal(reply.headers.get('x-ratelimit-limit'), '3');
      remaining.push(reply.headers.get('x-ratelimit-remaining')!);
      const reset = Number(reply.headers.get('x-ratelimit-reset'));
      assert.ok(reset >= 1 && reset <= 60);
    }
    assert.deepEqual(remaining, ['2', '1', '0']);
    const limited = await h.get('/api/v1/moments');
    assert.equal(limited.status, 429);
    assert.equal(limited.headers.get('content-type'), 'application/problem+json');
    const retry = Number(limited.headers.get('retry-after'));
    assert.ok(Number.isInteger(retry) && retry >= 1 && retry <= 60);
    assert.equal(limited.headers.get('x-ratelimit-remaining'), '0');
  });

  it('counts authenticated reads and writes in their own windows, per credential', async () => {
    for (let i = 0; i < 5; i += 1) assert.equal((await h.get('/random?layer_min=1', serviceKey)).headers.get('x-ratelimit-limit'), '5');
    assert.equal((await h.get('/api/v1/stats', serviceKey)).status, 429);
    const first = await h.post('/ingest/tdf', record('/1800/may/1/1200/x/y/z/one'), writer);
    assert.equal(first.headers.get('x-ratelimit-limit'), '2');
    assert.equal((await h.post('/ingest/tdf', record('/1800/may/1/1200/x/y/z/two'), writer)).status, 200);
    assert.equal((await h.post('/ingest/tdf', record('/1800/may/1/1200/x/y/z/three'), writer)).status, 429);
  });

  it('counts refused credentials against the caller\'s IP, so keys cannot be guessed without limit', async () => {
    const other = await startGraph({ RATE_LIMIT_PUBLIC_PER_MINUTE: '3' });
    try {
      const statuses: number[] = [];
      for (let i = 0; i < 4; i += 1) statuses.push((await other.get('/browse', { 'X-Service-Key': `guess-${i}` })).status);
      assert.deepEqual(statuses, [401, 401, 401, 429]);
    } finally {
      await other.stop();
    }
  });

  it('counts a service calling on behalf of users (the gateway) per user', async () => {
    const asUser = (user: string) => ({ ...serviceKey, 'X-User-ID': user });
    for (let i = 0; i < 5; i += 1) assert.equal((await h.get('/api/v1/stats', asUser('alice'))).status, 200);
    assert.equal((await h.get('/api/v1/stats', asUser('alice'))).status, 429);
    assert.equal((await h.get('/api/v1/stats', asUser('bob'))).status, 200);
  });

  it('ignores X-Forwarded-For unless proxies are trusted, so a client cannot pick a fresh address', async () => {
    const direct = await startGraph({ RATE_LIMIT_PUBLIC_PER_MINUTE: '2', TRUSTED_PROXY_HOPS: '0' });
    try {
      const statuses: number[] = [];
      for (let i = 0; i < 3; i += 1) statuses.push((await direct.get('/api/v1/stats', { 'X-Forwarded-For': `10.0.0.${i}` })).status);
      assert.deepEqual(statuses, [200, 200, 429]);
    } finally {
      await direct.stop();
    }
  });

  it('never limits /health and /metrics', async () => {
    for (let i = 0; i < 10; i += 1) assert.equal((await h.get('/health')).status, 200);
    assert.equal((await h.get('/metrics')).status, 200);
  });
});
