import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { z } from 'zod';
import { record } from '../../graph/test/fixtures.ts';
import { SERVICE_KEY as GRAPH_SERVICE_KEY, type GraphHarness, startGraph, writer } from '../../graph/test/harness.ts';
import { type GatewayHarness, type SignedIn, startGateway } from './harness.ts';

/**
 * The graph's MCP server on the public host: the official MCP client pointed at the gateway's
 * /api/v1/graph/mcp reaches the real graph service (docs/gateway.md, "The graph's MCP server").
 */
const FROM = '/1789/july/14/1530/france/ile-de-france/paris/storming-of-the-bastille';
const TO = '/1793/january/21/1022/france/ile-de-france/paris/execution-of-louis-xvi';

type ToolReply = { structuredContent: Record<string, any>; isError?: boolean };

async function connect(url: string, headers: Record<string, string> = {}): Promise<Client> {
  const client = new Client({ name: 'gateway-test', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } }));
  return client;
}
const call = async (client: Client, name: string, args: Record<string, unknown> = {}) => (await client.callTool({ name, arguments: args })) as ToolReply;

describe('gateway: the graph MCP server through the public host', function () {
  this.timeout(60_000);
  let graph: GraphHarness;
  let gw: GatewayHarness;
  let user: SignedIn;
  let mcpUrl: string;

  before(async () => {
    graph = await startGraph({ AUTOLINK_MAX_PER_TYPE: '0' });
    assert.equal((await graph.post('/ingest/tdf', [record(FROM, [{ target: TO, type: 'causes' }]), record(TO)], writer)).status, 200);
    // The real limits: the spec's public 60/min per address (the gateway's anonymous window), Pro 60/min per account.
    gw = await startGateway({ GRAPH_URL: graph.url, GRAPH_SERVICE_KEY, RATE_LIMIT_MULTIPLIER: '1' });
    user = await gw.user({ tier: 'pro' });
    mcpUrl = `${gw.url}/api/v1/graph/mcp`;
  });
  after(async () => {
    await gw?.stop();
    await graph?.stop();
  });

  it('serves the free read tools to an anonymous MCP client, reporting the interface version 1.26.0', async () => {
    const client = await connect(mcpUrl);
    try {
      assert.deepEqual(client.getServerVersion(), { name: 'tempora-graph', version: '1.26.0' });
      const names = (await client.listTools()).tools.map((tool) => tool.name).sort();
      assert.deepEqual(names, ['find_path', 'gen_render', 'graph_moment', 'graph_neighbors', 'graph_search', 'graph_stats', 'traverse_moments']);
      assert.equal((await call(client, 'graph_stats')).structuredContent.total_nodes, 2);
      const traverse = (await call(client, 'traverse_moments', { path: FROM, direction: 'future' })).structuredContent;
      assert.deepEqual(
        traverse.nodes.map((node: { id: string }) => node.id),
        [FROM, TO],
      );
      const path = (await call(client, 'find_path', { from_path: FROM, to_path: TO })).structuredContent;
      assert.equal(path.found, true);
      assert.equal(path.hops, 1);
    } finally {
      await client.close();
    }
  });

  it('serves signed-in users, read-only API keys included (the MCP server offers them only reads)', async () => {
    const key = await gw.call('POST', '/api/v1/users/me/api-keys', { headers: user.headers, body: { name: 'mcp', scopes: ['read'] } });
    assert.equal(key.status, 201, JSON.stringify(key.body));
    for (const headers of [user.headers, { 'X-API-Key': key.body.key as string }]) {
      const client = await connect(mcpUrl, headers);
      try {
        assert.equal((await call(client, 'graph_moment', { path: TO })).structuredContent.path, TO);
      } finally {
        await client.close();
      }
    }
  });

  it('keeps gen_render behind its own credential: neither anonymous callers nor users may render through the gateway', async () => {
    const target = '/1794/july/27/1200/france/ile-de-france/paris/thermidor';
    for (const headers of [{}, user.headers]) {
      const client = await connect(mcpUrl, headers);
      try {
        const refused = await call(client, 'gen_render', { path: target, event_name: 'Thermidor' });
        assert.equal(refused.isError, true);
        assert.match(refused.structuredContent.error, /writer token or a service key/);
      } finally {
        await client.close();
      }
    }
    assert.equal((await graph.get(`/api/v1/moments${target}`, writer)).status, 404, 'nothing was recorded');
  });

  it('applies the public limit (60 a minute per address) to anonymous MCP requests, with the rate-limit headers', async () => {
    const list = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' });
    const post = () =>
      fetch(mcpUrl, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'X-Forwarded-For': '198.51.100.7' },
        body: list,
      });
    const first = await post();
    assert.equal(first.status, 200);
    assert.equal(first.headers.get('x-ratelimit-limit'), '60');
    const remaining = Number(first.headers.get('x-ratelimit-remaining'));
    for (let i = 0; i < remaining; i += 1) assert.equal((await post()).status, 200);
    const limited = await post();
    assert.equal(limited.status, 429);
    assert.ok(Number(limited.headers.get('retry-after')) >= 1);
  });

  it('refuses a service or admin credential, as on every proxied path', async () => {
    const reply = await fetch(mcpUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'X-Admin-Key': 'gw-admin-key-0123456789' },
      body: '{}',
    });
    assert.equal(reply.status, 403);
  });
});

describe('gateway: MCP answers streamed as Server-Sent Events pass through unbuffered', function () {
  this.timeout(30_000);
  let upstream: Server;
  let gw: GatewayHarness;
  let release: () => void = () => {};

  before(async () => {
    // An MCP server answering with event streams (enableJsonResponse off): a progress notification, then,
    // only once the client has seen it, the result. A gateway that buffered the stream would deadlock it.
    upstream = createServer(async (req, res) => {
      const server = new McpServer({ name: 'streaming-graph', version: '1.26.0' });
      server.registerTool('slow_echo', { inputSchema: { text: z.string() } }, async ({ text }, extra) => {
        const progressToken = extra._meta?.progressToken;
        if (progressToken !== undefined)
          await extra.sendNotification({ method: 'notifications/progress', params: { progressToken, progress: 1, total: 2, message: 'halfway' } });
        await new Promise<void>((resolve) => {
          release = resolve;
        });
        return { content: [{ type: 'text', text }] };
      });
      const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
      res.on('close', () => void server.close());
      await server.connect(transport);
      await transport.handleRequest(req, res);
    });
    await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
    gw = await startGateway({ GRAPH_URL: `http://127.0.0.1:${(upstream.address() as AddressInfo).port}` });
  });
  after(async () => {
    await gw?.stop();
    upstream?.closeAllConnections();
    await new Promise((resolve) => upstream?.close(resolve));
  });

  it('delivers the progress event before the upstream sends the result', async () => {
    const client = await connect(`${gw.url}/api/v1/graph/mcp`);
    try {
      const progress: string[] = [];
      const result = await client.callTool({ name: 'slow_echo', arguments: { text: 'through' } }, undefined, {
        onprogress: (event) => {
          progress.push(event.message ?? '');
          release();
        },
        timeout: 10_000,
      });
      assert.deepEqual(progress, ['halfway']);
      assert.deepEqual(result.content, [{ type: 'text', text: 'through' }]);
    } finally {
      await client.close();
    }
  });
});
