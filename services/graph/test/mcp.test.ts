import assert from 'node:assert/strict';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { startGraph, writer, SERVICE_KEY, type GraphHarness } from './harness.ts';
import { ANCHOR, ISLAND, chain, fixtureRecords, outOf } from './fixtures.ts';

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
    assert.deepEqual(reply.nodes.map((node: { id: string; hop: number }) => [node.id, node.hop]), [0, 1, 2, 3, 4].map((n) => [chain(n), n]));
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
    const metrics = await (await fetch(`${h.url}/metrics`)).text();
    assert.match(metrics, /^graph_mcp_tool_calls_total\{tool="graph_stats",outcome="ok",service="graph"\} [1-9]/m);
    assert.match(metrics, /^graph_mcp_tool_calls_total\{tool="traverse_moments",outcome="invalid",service="graph"\} [1-9]/m);
    assert.match(metrics, /^graph_index_load_seconds\{service="graph"\} /m);
  });
});
