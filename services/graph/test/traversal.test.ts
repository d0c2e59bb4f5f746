import assert from 'node:assert/strict';
import { PathSchema, TraverseSchema } from '../src/schemas.ts';
import { ANCHOR, at, chain, DIRECTED, fixtureRecords, ISLAND, into, outOf, SYMMETRIC } from './fixtures.ts';
import { type GraphHarness, serviceKey, startGraph, writer } from './harness.ts';

const noSlash = (path: string) => path.slice(1);
const ids = (nodes: Array<{ id: string }>) => nodes.map((node) => node.id).sort();

describe('graph traversal and shortest paths over HTTP', function () {
  this.timeout(60_000);
  let h: GraphHarness;

  before(async () => {
    h = await startGraph({ AUTOLINK_MAX_PER_TYPE: '0' });
    const ingest = await h.post('/ingest/tdf', fixtureRecords(), writer);
    assert.equal(ingest.status, 200, JSON.stringify(ingest.body));
  });
  after(() => h?.stop());

  describe('traverse', () => {
    const traverse = (query: string) => h.get(`/api/v1/graph/traverse/${noSlash(ANCHOR)}?${query}`, serviceKey);

    it('follows the direction table edge type by edge type', async () => {
      const future = TraverseSchema.parse((await traverse('direction=future&depth=1')).body);
      assert.deepEqual(ids(future.nodes), [ANCHOR, outOf('causes'), outOf('precedes'), outOf('influences'), into('caused_by'), into('follows')].sort());
      const past = (await traverse('direction=past&depth=1')).body;
      assert.deepEqual(ids(past.nodes), [ANCHOR, outOf('caused_by'), outOf('follows'), into('causes'), into('precedes'), into('influences')].sort());
      const both = (await traverse('depth=1')).body;
      assert.equal(both.direction, 'both');
      assert.deepEqual(ids(both.nodes), [ANCHOR, ...DIRECTED.flatMap((type) => [outOf(type), into(type)])].sort());
      for (const type of DIRECTED) {
        const only = (await traverse(`direction=future&depth=1&edge_types=${type}`)).body;
        const expected = ['causes', 'precedes', 'influences'].includes(type) ? outOf(type) : into(type);
        assert.deepEqual(ids(only.nodes), [ANCHOR, expected].sort(), type);
      }
    });

    it('follows symmetric types both ways, and only when listed', async () => {
      const defaults = (await traverse('depth=1')).body;
      for (const type of SYMMETRIC) assert.ok(!ids(defaults.nodes).includes(outOf(type)), `${type} not followed by default`);
      for (const type of SYMMETRIC) {
        for (const direction of ['future', 'past']) {
          const reply = (await traverse(`direction=${direction}&depth=1&edge_types=${type}`)).body;
          assert.deepEqual(ids(reply.nodes), [ANCHOR, outOf(type), into(type)].sort(), `${type} ${direction}`);
        }
      }
    });

    it('reports hop levels, the anchor at hop 0, and every edge among the nodes', async () => {
      const reply = TraverseSchema.parse((await h.get(`/api/v1/graph/traverse/${noSlash(chain(0))}?direction=future&depth=4`, serviceKey)).body);
      assert.deepEqual(
        reply.nodes.map((node) => [node.id, node.hop]),
        [0, 1, 2, 3, 4].map((n) => [chain(n), n]),
      );
      assert.equal(reply.anchor, chain(0));
      assert.equal(reply.depth, 4);
      assert.equal(reply.edge_count, 4);
      assert.equal(reply.node_count, 5);
      assert.equal(reply.truncated, false);
      const past = (await h.get(`/api/v1/graph/traverse/${noSlash(chain(3))}?direction=past&depth=2`, serviceKey)).body;
      assert.deepEqual(
        past.nodes.map((node: { id: string; hop: number }) => [node.id, node.hop]),
        [
          [chain(3), 0],
          [chain(2), 1],
          [chain(1), 2],
        ],
      );
      const edge = past.edges.find((e: { source: string }) => e.source === chain(2));
      assert.equal(edge.target, chain(3), 'edges keep their stored direction');
    });

    it('sets truncated when limit clips the expansion, and clamps limit to 500', async () => {
      const clipped = (await traverse('limit=3')).body;
      assert.equal(clipped.node_count, 3);
      assert.equal(clipped.truncated, true);
      assert.ok(
        clipped.edges.every((edge: { source: string; target: string }) => ids(clipped.nodes).includes(edge.source) && ids(clipped.nodes).includes(edge.target)),
      );
      const capped = (await traverse('limit=100000')).body;
      assert.equal(capped.limit, 500);
      assert.equal(capped.truncated, false);
    });

    it('applies min_weight', async () => {
      const reply = (await h.get(`/api/v1/graph/traverse/${noSlash(chain(0))}?direction=future&depth=4&min_weight=0.65`, serviceKey)).body;
      assert.deepEqual(
        reply.nodes.map((node: { id: string }) => node.id),
        [chain(0), chain(1), chain(2), chain(3)],
      );
    });

    it('refuses depth outside 1-4 and unknown parameters values with 422', async () => {
      for (const query of ['depth=0', 'depth=5', 'depth=two', 'direction=sideways', 'edge_types=causes,begets', 'edge_types=', 'limit=0', 'min_weight=2']) {
        assert.equal((await traverse(query)).status, 422, query);
      }
    });

    it('answers 404 for a missing anchor', async () => {
      const reply = await h.get(`/api/v1/graph/traverse/${noSlash(at('missing'))}`, serviceKey);
      assert.equal(reply.status, 404);
      assert.equal(reply.headers.get('content-type'), 'application/problem+json');
    });
  });

  describe('path', () => {
    const path = (from: string, to: string, extra = '') => h.get(`/api/v1/graph/path?from=${from}&to=${to}${extra}`, serviceKey);

    it('returns the shortest path in order, hop = position', async () => {
      const reply = PathSchema.parse((await path(chain(0), chain(4))).body);
      assert.equal(reply.found, true);
      assert.equal(reply.hops, 4);
      assert.deepEqual(
        reply.nodes.map((node) => [node.id, node.hop]),
        [0, 1, 2, 3, 4].map((n) => [chain(n), n]),
      );
      assert.deepEqual(
        reply.edges.map((edge) => [edge.source, edge.target, edge.type]),
        [0, 1, 2, 3].map((n) => [chain(n), chain(n + 1), 'causes']),
      );
      const reverse = (await path(chain(4), chain(0))).body;
      assert.deepEqual(
        reverse.nodes.map((node: { id: string }) => node.id),
        [4, 3, 2, 1, 0].map(chain),
        'edges are undirected',
      );
    });

    it('leaves challenges out by default and follows it when listed', async () => {
      assert.equal((await path(chain(0), chain(5))).body.hops, 5);
      const listed = (await path(chain(0), chain(5), '&edge_types=causes,challenges')).body;
      assert.equal(listed.hops, 1);
      assert.equal(listed.edges[0].type, 'challenges');
    });

    it('answers found:false within max_hops, 404 only for a missing endpoint', async () => {
      const short = await path(chain(0), chain(5), '&max_hops=4');
      assert.equal(short.status, 200);
      assert.equal(short.body.found, false);
      assert.deepEqual(short.body.nodes, []);
      assert.equal((await path(chain(0), ISLAND)).body.found, false);
      assert.equal((await path(chain(0), at('missing'))).status, 404);
      assert.equal((await path(at('missing'), chain(0))).status, 404);
    });

    it('clamps max_hops to 10, refuses values below 1 and bad paths', async () => {
      assert.equal((await path(chain(0), chain(1), '&max_hops=50')).body.max_hops, 10);
      assert.equal((await path(chain(0), chain(1), '&max_hops=0')).status, 422);
      assert.equal((await path(chain(0), '/1900/march')).status, 422);
      assert.equal((await h.get(`/api/v1/graph/path?from=${chain(0)}`, serviceKey)).status, 422);
    });
  });
});
