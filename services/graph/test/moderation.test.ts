import assert from 'node:assert/strict';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { record } from './fixtures.ts';
import { type GraphHarness, serviceKey, startGraph, writer } from './harness.ts';

/**
 * Moderation before publication: a moment waiting for the Judge (status pending) or rejected by it
 * (archived, private) is left out of every public read (stats, lists, search, browse, today, random, a
 * neighbour's edges and TDF, traversal, path, the MCP tools) and shown by path to service-key and writer
 * callers only; once passed, every read shows it. The gateway's calls for a user (its service key with
 * X-User-ID) are that user's, not the service's.
 */
const place = (slug: string, year: number) => `/${year}/october/9/1200/moderland/east/gamma/${slug}`;
const BEFORE = place('moderation-cause', 1850);
const PENDING = place('moderation-pending-proposal', 1851);
const AFTER = place('moderation-effect', 1852);
const REJECTED = place('moderation-rejected-spam', 1851);
const LONELY = place('moderation-lonely', 1700);

const asUser = { ...serviceKey, 'X-User-ID': 'user-42' };
const anonymous = {};

async function mcp(url: string, headers: Record<string, string> = {}) {
  const client = new Client({ name: 'moderation-test', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${url}/mcp/`), { requestInit: { headers } }));
  return client;
}
const tool = async (client: Client, name: string, args: Record<string, unknown> = {}) =>
  ((await client.callTool({ name, arguments: args })) as { structuredContent: Record<string, any>; isError?: boolean }).structuredContent;

describe('moderation: public reads show only what the Judge or a writer has passed', function () {
  this.timeout(60_000);
  let h: GraphHarness;
  let client: Client;
  before(async () => {
    h = await startGraph({ AUTOLINK_MAX_PER_TYPE: '0' });
    const records = [
      record(BEFORE, [{ target: PENDING, type: 'causes' }], { tags: ['moderation'] }),
      // The only chain from BEFORE to AFTER runs through the pending proposal.
      record(PENDING, [{ target: AFTER, type: 'causes' }], {
        status: 'pending',
        layer: 2,
        source_type: 'expander',
        tags: ['moderation'],
        event_name: 'Moderation pending proposal',
      }),
      record(AFTER, [], { tags: ['moderation'] }),
      record(REJECTED, [], { status: 'archived', visibility: 'private', layer: 2, event_name: 'Moderation rejected spam' }),
      record(LONELY, [], { layer: 1 }),
    ];
    assert.equal((await h.post('/ingest/tdf', records, writer)).status, 200);
    client = await mcp(h.url);
  });
  after(async () => {
    await client?.close();
    await h?.stop();
  });

  /** Every read path, each asserting whether the pending proposal shows. */
  async function checkEveryRead(shown: boolean) {
    const seen = (value: boolean, what: string) => assert.equal(value, shown, `${what}: the proposal is ${shown ? 'missing' : 'shown'}`);
    for (const headers of [anonymous, asUser]) {
      const stats = (await h.get('/api/v1/stats', headers)).body;
      seen(stats.total_nodes === 4, 'stats total_nodes');
      seen(stats.layer_counts['2'] === 1, 'stats layer_counts');
      seen(stats.edge_type_counts.causes === 2, 'stats edge_type_counts');
      seen(stats.source_type_counts.expander === 1, 'stats source_type_counts');

      const list = (await h.get('/api/v1/moments?limit=100', headers)).body;
      seen(
        list.items.some((item: { path: string }) => item.path === PENDING),
        'list',
      );
      seen(list.total === 4, 'list total');
      seen((await h.get('/api/v1/moments?q=pending%20proposal', headers)).body.total === 1, 'full-text search');
      seen((await h.get('/api/v1/moments?entity=lovelace&year_from=1851&year_to=1851', headers)).body.total === 1, 'figure filter');

      const detail = await h.get(`/api/v1/moments${PENDING}`, headers);
      seen(detail.status === 200, 'the moment by path');
      const cause = (await h.get(`/api/v1/moments${BEFORE}`, headers)).body;
      seen(
        cause.edges.some((edge: { target: string }) => edge.target === PENDING),
        "its cause's edges",
      );
      const tdf = (await h.get(`/api/v1/moments${BEFORE}?format=tdf`, headers)).body;
      seen(
        tdf.payload.edges.some((edge: { target: string }) => edge.target === PENDING),
        "its cause's TDF edges",
      );
    }

    const search = (await h.get('/search?tags=moderation', asUser)).body;
    seen(search.total === 3, '/search');
    const browse = (await h.get('/browse?prefix=/1851/october/9/1200/moderland/east/gamma', asUser)).body;
    seen(
      browse.children.some((child: { path: string }) => child.path === PENDING),
      '/browse',
    );
    seen((await h.get('/browse?prefix=/1851', asUser)).body.total === 1, '/browse counts');
    const today = (await h.get('/today?month=october&day=9', asUser)).body;
    seen(
      today.items.some((item: { path: string }) => item.path === PENDING),
      '/today',
    );
    seen((await h.get('/random?layer_min=2', asUser)).status === 200, '/random');

    const traverse = (await h.get(`/api/v1/graph/traverse${BEFORE}?direction=future&depth=2`, asUser)).body;
    seen(
      traverse.nodes.some((node: { id: string }) => node.id === PENDING),
      'traverse',
    );
    seen((await h.get(`/api/v1/graph/traverse${PENDING}`, asUser)).status === 200, 'traverse from it');
    const path = (await h.get(`/api/v1/graph/path?from=${BEFORE}&to=${AFTER}`, asUser)).body;
    seen(path.found === true, 'path through it');

    seen((await tool(client, 'graph_stats')).total_nodes === 4, 'MCP graph_stats');
    seen((await tool(client, 'graph_search', { query: 'pending proposal' })).total === 1, 'MCP graph_search');
    seen((await tool(client, 'graph_moment', { path: PENDING })).path === PENDING, 'MCP graph_moment');
    seen(
      (await tool(client, 'graph_neighbors', { path: BEFORE, direction: 'future' })).nodes.some((node: { id: string }) => node.id === PENDING),
      'MCP graph_neighbors',
    );
    seen(
      (await tool(client, 'traverse_moments', { path: BEFORE, direction: 'future', depth: 2 })).nodes.some((node: { id: string }) => node.id === PENDING),
      'MCP traverse_moments',
    );
    seen((await tool(client, 'find_path', { from_path: BEFORE, to_path: AFTER })).found === true, 'MCP find_path');
  }

  it("leaves a pending moment out of every public read, the gateway's calls for users included", async () => {
    await checkEveryRead(false);
  });

  it('shows pending and rejected moments by path to service-key and writer callers only', async () => {
    for (const headers of [writer, serviceKey]) {
      for (const [path, status] of [
        [PENDING, 'pending'],
        [REJECTED, 'archived'],
      ] as const) {
        const reply = await h.get(`/api/v1/moments${path}`, headers);
        assert.equal(reply.status, 200, path);
        assert.equal(reply.body.status, status);
      }
    }
    for (const headers of [anonymous, asUser]) {
      for (const path of [PENDING, REJECTED]) assert.equal((await h.get(`/api/v1/moments${path}`, headers)).status, 404, path);
    }
    const trusted = await mcp(h.url, serviceKey);
    try {
      assert.equal((await tool(trusted, 'graph_moment', { path: PENDING })).status, 'pending');
    } finally {
      await trusted.close();
    }
    const forUser = await mcp(h.url, asUser);
    try {
      assert.match((await tool(forUser, 'graph_moment', { path: PENDING })).error, /no moment/);
    } finally {
      await forUser.close();
    }
    // The rejected moment stays out of every read, whoever asks.
    assert.equal((await h.get('/api/v1/moments?q=rejected%20spam', writer)).body.total, 0);
    assert.equal((await h.get('/random?layer_min=2', serviceKey)).status, 404);
  });

  it('shows the moment everywhere once it is passed (status active)', async () => {
    const passed = record(PENDING, [{ target: AFTER, type: 'causes' }], {
      status: 'active',
      layer: 2,
      source_type: 'expander',
      tags: ['moderation'],
      event_name: 'Moderation pending proposal',
    });
    assert.equal((await h.post('/ingest/tdf', passed, writer)).status, 200);
    await checkEveryRead(true);
  });
});
