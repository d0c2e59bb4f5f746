import assert from 'node:assert/strict';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { loadConfig } from '@tempora/kit/runtime';
import { initialize, NEWEST_PROTOCOL, postJsonRpc } from '../../../test/support/mcp-conformance.ts';
import { scrape } from '../../kit/test/metrics-support.ts';
import { GraphConfigSchema } from '../src/config.ts';
import { ANCHOR, chain, fixtureRecords, ISLAND, outOf } from './fixtures.ts';
import { type GraphHarness, SERVICE_KEY, startGraph, writer } from './harness.ts';

async function connect(url: string, headers: Record<string, string> = {}): Promise<Client> {
  const client = new Client({ name: 'graph-test', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${url}/mcp/`), { requestInit: { headers } }));
  return client;
}

type Structured = Record<string, any>;
const call = async (client: Client, name: string, args: Record<string, unknown> = {}) =>
  (await client.callTool({ name, arguments: args })) as { structuredContent: Structured; isError?: boolean; content: Array<{ text: string }> };

describe('graph MCP server', function () {
  this.timeout(60_000);
  let h: GraphHarness;
  let client: Client;

  before(async () => {
    h = await startGraph({ AUTOLINK_MAX_PER_TYPE: '0' });
    assert.equal((await h.post('/ingest/tdf', fixtureRecords(), writer)).status, 200);
    client = await connect(h.url);
  });
  after(async () => {
    await client?.close();
    await h?.stop();
  });

  it('lists every tool with input and output schemas', async () => {
    const { tools } = await client.listTools();
    const names = tools.map((tool) => tool.name).sort();
    assert.deepEqual(names, ['find_path', 'gen_render', 'graph_moment', 'graph_neighbors', 'graph_search', 'graph_stats', 'traverse_moments']);
    for (const tool of tools) {
      assert.equal(tool.inputSchema.type, 'object', tool.name);
      assert.equal(tool.outputSchema?.type, 'object', tool.name);
    }
    const traverse = tools.find((tool) => tool.name === 'traverse_moments')!;
    const limit = (traverse.inputSchema.properties as Record<string, { default?: number }>).limit;
    assert.equal(limit?.default, 50);
    assert.deepEqual(traverse.inputSchema.required, ['path']);
  });

  it('answers the free read tools without authentication', async () => {
    assert.equal((await call(client, 'graph_stats')).structuredContent.total_nodes, fixtureRecords().length);
    const search = await call(client, 'graph_search', { query: 'island' });
    assert.equal(search.structuredContent.items[0].path, ISLAND);
    const moment = await call(client, 'graph_moment', { path: ANCHOR });
    assert.equal(moment.structuredContent.path, ANCHOR);
    const neighbors = await call(client, 'graph_neighbors', { path: ANCHOR, direction: 'future' });
    assert.ok(neighbors.structuredContent.nodes.some((node: { id: string }) => node.id === outOf('causes')));
    assert.ok(neighbors.structuredContent.nodes.every((node: { hop: number }) => node.hop <= 1));
  });

  it('traverses with the HTTP shape, a default limit of 50 and a cap of 200', async () => {
    const reply = (await call(client, 'traverse_moments', { path: chain(0), direction: 'future', depth: 4 })).structuredContent;
    assert.deepEqual(
      reply.nodes.map((node: { id: string; hop: number }) => [node.id, node.hop]),
      [0, 1, 2, 3, 4].map((n) => [chain(n), n]),
    );
    assert.equal(reply.limit, 50);
    assert.equal(reply.truncated, false);
    assert.equal((await call(client, 'traverse_moments', { path: chain(0), limit: 10_000 })).structuredContent.limit, 200);
    assert.equal((await call(client, 'traverse_moments', { path: ANCHOR, limit: 2 })).structuredContent.truncated, true);
  });

  it('finds paths, and reports found:false rather than an error', async () => {
    const found = (await call(client, 'find_path', { from_path: chain(0), to_path: chain(3) })).structuredContent;
    assert.equal(found.found, true);
    assert.equal(found.hops, 3);
    const none = await call(client, 'find_path', { from_path: chain(0), to_path: ISLAND });
    assert.equal(none.isError, undefined);
    assert.equal(none.structuredContent.found, false);
  });

  it('answers invalid input with error and suggestion instead of failing', async () => {
    for (const [tool, args] of [
      ['traverse_moments', { path: chain(0), depth: 9 }],
      ['traverse_moments', { path: 'not/a/path' }],
      ['traverse_moments', {}],
      ['traverse_moments', { path: chain(0), depth: 'deep' }],
      ['find_path', { from_path: chain(0) }],
      ['graph_moment', { path: '/1900/march/1/1200/testland/north/alpha/missing' }],
      ['graph_search', { year_from: 'long ago' }],
      // Text PostgreSQL cannot store is refused before it reaches the database.
      ['graph_search', { query: 'moon\u0000landing' }],
      ['graph_search', { entity: '\ud800' }],
    ] as const) {
      const reply = await call(client, tool, args);
      assert.equal(reply.isError, true, `${tool} ${JSON.stringify(args)}`);
      assert.equal(typeof reply.structuredContent.error, 'string');
      assert.ok(reply.structuredContent.suggestion.length > 10);
    }
  });

  it('requires a writer token or service key for gen_render, and queues like POST /generate', async () => {
    const path = '/1953/march/3/1200/testland/north/alpha/mcp-render';
    const anonymous = await call(client, 'gen_render', { path, event_name: 'MCP render' });
    assert.equal(anonymous.isError, true);
    assert.match(anonymous.structuredContent.error, /writer token/);
    for (const headers of [writer, { 'X-Service-Key': SERVICE_KEY }]) {
      const trusted = await connect(h.url, headers);
      try {
        const queued = await call(trusted, 'gen_render', { path, event_name: 'MCP render' });
        assert.equal(queued.structuredContent.job.status, 'queued');
        assert.equal(queued.structuredContent.moment.path, path);
      } finally {
        await trusted.close();
      }
    }
    assert.equal((await h.get(`/api/v1/moments${path}`)).body.layer, 0);
  });

  it('reports the interface version the spec names (v1.26.0) as serverInfo.version', () => {
    assert.deepEqual(client.getServerVersion(), { name: 'tempora-graph', version: '1.26.0' });
  });

  it('answers under the graph prefix too, where the gateway forwards it', async () => {
    const prefixed = new Client({ name: 'graph-test', version: '1.0.0' });
    await prefixed.connect(new StreamableHTTPClientTransport(new URL(`${h.url}/api/v1/graph/mcp`)));
    try {
      assert.deepEqual((await call(prefixed, 'graph_stats')).structuredContent, (await call(client, 'graph_stats')).structuredContent);
    } finally {
      await prefixed.close();
    }
  });

  it("does not lend the gateway's service key to its users: gen_render for a user (X-User-ID) is refused", async () => {
    const forUser = await connect(h.url, { 'X-Service-Key': SERVICE_KEY, 'X-User-ID': 'user-7' });
    try {
      const refused = await call(forUser, 'gen_render', { path: '/1953/march/4/1200/testland/north/alpha/user-render', event_name: 'User render' });
      assert.equal(refused.isError, true);
      assert.match(refused.structuredContent.error, /writer token/);
      assert.match(refused.structuredContent.suggestion, /timepoints\/generate/);
    } finally {
      await forUser.close();
    }
    assert.equal((await h.get('/api/v1/moments/1953/march/4/1200/testland/north/alpha/user-render', writer)).status, 404, 'nothing was recorded');
  });

  it('refuses GET on the stateless endpoint', async () => {
    assert.equal((await fetch(`${h.url}/mcp/`)).status, 405);
  });
  it('counts tool calls by tool and outcome in /metrics', async () => {
    await call(client, 'graph_stats');
    await call(client, 'traverse_moments', { path: 'not a path' });
    const metrics = await scrape(h.server);
    assert.match(metrics, /^graph_mcp_tool_calls_total\{tool="graph_stats",outcome="ok",service="graph"\} [1-9]/m);
    assert.match(metrics, /^graph_mcp_tool_calls_total\{tool="traverse_moments",outcome="invalid",service="graph"\} [1-9]/m);
    assert.match(metrics, /^graph_index_load_seconds\{service="graph"\} /m);
  });
});

describe('graph MCP server: DNS-rebinding protection (MCP_ALLOWED_HOSTS)', function () {
  this.timeout(60_000);
  let h: GraphHarness;
  let port: string;
  const hello = initialize(NEWEST_PROTOCOL);

  before(async () => {
    h = await startGraph({ TEMPORA_DOMAIN: 'tempora.test' });
    port = new URL(h.url).port;
  });
  after(async () => {
    await h?.stop();
  });

  it('answers the loopback names on any port, the service URL host and TEMPORA_DOMAIN with its subdomains, from an allowed Origin or none', async () => {
    for (const [host, origin] of [
      [`localhost:${port}`, `http://localhost:${port}`],
      [`127.0.0.1:${port}`, undefined],
      [`[::1]:${port}`, 'http://[::1]:3000'],
      ['localhost', 'http://127.0.0.1:8080'],
      ['tempora.test', 'https://app.tempora.test'],
      ['mcp.tempora.test:443', 'https://tempora.test'],
    ] as const) {
      const reply = await postJsonRpc(`${h.url}/mcp/`, hello, { host, ...(origin ? { origin } : {}) });
      assert.equal(reply.status, 200, `${host} ${origin}: ${JSON.stringify(reply.body)}`);
      assert.equal(reply.body.result.serverInfo.name, 'tempora-graph');
    }
  });

  it('refuses a foreign Host, or a foreign or opaque Origin, with a problem before any MCP handling, at both paths and for GET', async () => {
    for (const path of ['/mcp/', '/api/v1/graph/mcp']) {
      const foreign: Array<Record<string, string>> = [
        { host: 'evil.example.com' },
        { host: `evil.example.com:${port}`, origin: `http://evil.example.com:${port}` },
        { host: `localhost.evil.example.com:${port}` },
        { host: 'tempora.test.evil.example.com' },
        { host: `localhost:${port}`, origin: 'http://evil.example.com' },
        { host: `localhost:${port}`, origin: 'null' },
        { host: `localhost:${port}`, origin: 'file:///etc/passwd' },
        { host: `localhost:${port}`, origin: 'https://nottempora.test' },
      ];
      for (const headers of foreign) {
        const reply = await postJsonRpc(`${h.url}${path}`, hello, headers);
        assert.equal(reply.status, 403, `${path} ${JSON.stringify(headers)}`);
        assert.match(String(reply.headers['content-type']), /^application\/problem\+json/);
        assert.equal(reply.body.status, 403);
        assert.match(reply.body.detail, /MCP_ALLOWED_HOSTS/);
      }
    }
    const get = await fetch(`${h.url}/mcp/`, { headers: { origin: 'http://evil.example.com' } });
    assert.equal(get.status, 403, 'refused before the 405 of GET');
  });

  it('answers only the names MCP_ALLOWED_HOSTS lists when set', async () => {
    const listed = await startGraph({ MCP_ALLOWED_HOSTS: 'graph.internal, .tempora.example' });
    try {
      const url = `${listed.url}/mcp/`;
      assert.equal((await postJsonRpc(url, hello, { host: 'graph.internal:8082' })).status, 200);
      assert.equal((await postJsonRpc(url, hello, { host: 'api.tempora.example', origin: 'https://app.tempora.example' })).status, 200);
      assert.equal((await postJsonRpc(url, hello, { host: `127.0.0.1:${new URL(listed.url).port}` })).status, 403, 'the loopback default is replaced');
      assert.equal((await postJsonRpc(url, hello, { host: 'graph.internal', origin: 'http://localhost:3000' })).status, 403);
    } finally {
      await listed.stop();
    }
  });

  it('defaults to the loopback names, the host of GRAPH_URL and .TEMPORA_DOMAIN, and refuses a malformed MCP_ALLOWED_HOSTS at startup', () => {
    assert.deepEqual(loadConfig(GraphConfigSchema, { GRAPH_URL: 'http://tempora-graph.ns.svc:8082', TEMPORA_DOMAIN: 'Tempora.Example' }).MCP_ALLOWED_HOSTS, [
      'localhost',
      '127.0.0.1',
      '[::1]',
      'tempora-graph.ns.svc',
      '.tempora.example',
    ]);
    assert.deepEqual(loadConfig(GraphConfigSchema, { MCP_ALLOWED_HOSTS: ' ' }).MCP_ALLOWED_HOSTS, ['localhost', '127.0.0.1', '[::1]']);
    for (const bad of ['http://graph.internal', 'graph.internal:8082', 'evil.com/x', '*.tempora.example']) {
      assert.throws(() => loadConfig(GraphConfigSchema, { MCP_ALLOWED_HOSTS: bad }), /MCP_ALLOWED_HOSTS/, bad);
    }
  });
});
