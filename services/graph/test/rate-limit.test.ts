import assert from 'node:assert/strict';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { record } from './fixtures.ts';
import { type GraphHarness, serviceKey, startGraph, writer } from './harness.ts';

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

  it("counts refused credentials against the caller's IP, so keys cannot be guessed without limit", async () => {
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

  it('counts MCP requests as reads and gen_render also as a write', async () => {
    const other = await startGraph({ RATE_LIMIT_PUBLIC_PER_MINUTE: '100', RATE_LIMIT_READ_PER_MINUTE: '100', RATE_LIMIT_WRITE_PER_MINUTE: '2' });
    const client = new Client({ name: 'rate-test', version: '1.0.0' });
    try {
      const list = { jsonrpc: '2.0', id: 1, method: 'tools/list' };
      const headers = { ...writer, accept: 'application/json, text/event-stream' };
      assert.equal((await other.post('/mcp', list, headers)).headers.get('x-ratelimit-limit'), '100', "a writer's MCP request is a read");
      assert.equal((await other.post('/mcp', list, { accept: headers.accept })).headers.get('x-ratelimit-limit'), '100', 'an anonymous one is public');
      await client.connect(new StreamableHTTPClientTransport(new URL(`${other.url}/mcp/`), { requestInit: { headers: writer } }));
      const render = (slug: string) =>
        client.callTool({ name: 'gen_render', arguments: { path: `/1800/may/2/1200/x/y/z/${slug}`, event_name: slug } }) as Promise<{
          isError?: boolean;
          structuredContent: Record<string, string>;
        }>;
      assert.equal((await render('first')).isError, undefined);
      assert.equal((await render('second')).isError, undefined);
      const third = await render('third');
      assert.equal(third.isError, true);
      assert.match(third.structuredContent.error!, /rate limited.*retry in \d+ s/);
      assert.equal((await client.callTool({ name: 'graph_stats', arguments: {} })).isError, undefined, 'reads go on');
    } finally {
      await client.close();
      await other.stop();
    }
  });

  it('never limits /health', async () => {
    for (let i = 0; i < 10; i += 1) assert.equal((await h.get('/health')).status, 200);
  });
});
