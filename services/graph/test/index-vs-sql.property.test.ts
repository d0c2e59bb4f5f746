import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import fc from 'fast-check';
import { propertyParameters, propertyTimeout } from '../../../test/support/properties.ts';
import { EDGE_TYPES } from '../src/domain/edge-types.ts';
import { shortestPath, traverse } from '../src/domain/graph-search.ts';
import { type GraphHarness, serviceKey, startGraph, writer } from './harness.ts';

/**
 * The service answers traverse and path from its in-memory index, kept current by every write, and from
 * SQL while the index loads: on random graphs written through the API (curated edges of every type,
 * automatic links, private and pending moments), the two answer the same.
 */

const scenario = fc.record({
  moments: fc.array(
    fc.record({
      year: fc.constantFrom(1800, 1801, 1900),
      city: fc.constantFrom('alpha', 'beta'),
      tags: fc.subarray(['a', 'b', 'c']),
      status: fc.constantFrom('active', 'active', 'active', 'pending'),
      visibility: fc.constantFrom('public', 'public', 'public', 'private'),
      edges: fc.array(
        fc.record({
          to: fc.nat(),
          type: fc.constantFrom(...EDGE_TYPES),
          weight: fc.oneof(fc.constantFrom(0.1, 0.3, 0.5, 0.9), fc.double({ min: 0, max: 1, noNaN: true })),
        }),
        { maxLength: 4 },
      ),
    }),
    { minLength: 2, maxLength: 9 },
  ),
  queries: fc.array(
    fc.record({
      from: fc.nat(),
      to: fc.nat(),
      direction: fc.constantFrom('past', 'future', 'both'),
      depth: fc.integer({ min: 1, max: 4 }),
      types: fc.subarray([...EDGE_TYPES], { minLength: 1 }),
      limit: fc.integer({ min: 1, max: 12 }),
      // Bounds near the edges' own weights, where float32 and float64 comparisons could part.
      minWeight: fc.oneof(fc.constantFrom(0, 0.1, 0.3, 0.5), fc.tuple(fc.nat(), fc.constantFrom(-1e-12, 0, 1e-12))),
      maxHops: fc.integer({ min: 1, max: 10 }),
    }),
    { minLength: 1, maxLength: 4 },
  ),
});

describe('graph traverse and path: the index and SQL answer the same (properties)', function () {
  this.timeout(propertyTimeout(60_000));
  let h: GraphHarness;
  before(async () => {
    h = await startGraph();
  });
  after(async () => {
    await h?.stop();
  });

  it('a min_weight within float32 resolution of a weight gets the same answer from both (found by the property)', async () => {
    const [a, b] = ['/1800/may/1/1200/testland/north/alpha/close-a', '/1800/may/1/1200/testland/north/alpha/close-b'];
    assert.equal(
      (
        await h.post(
          '/ingest/tdf',
          [{ payload: { path: a, event_name: 'a' } }, { payload: { path: b, event_name: 'b', edges: [{ target: a, type: 'same_figure', weight: 0.5 }] } }],
          writer,
        )
      ).status,
      200,
    );
    const options = { direction: 'past' as const, depth: 1, types: ['same_figure' as const], limit: 5, minWeight: 0.500000000001 };
    const reply = await h.get(
      `/api/v1/graph/traverse/${a.slice(1)}?direction=past&depth=1&edge_types=same_figure&limit=5&min_weight=${options.minWeight}`,
      serviceKey,
    );
    const bySql = await traverse(h.instance.graph.repository.adjacency.sqlNeighbors, Number((await h.instance.graph.moment(a, true))!.id), options);
    assert.equal(reply.body.nodes.length, bySql.hops.size);
  });

  it('on random graphs, the service (its index) and the SQL neighbour source give the same traversals and paths', async () => {
    await fc.assert(
      fc.asyncProperty(scenario, async ({ moments, queries }) => {
        const run = randomBytes(4).toString('hex');
        const paths = moments.map((m, i) => `/${m.year}/may/1/1200/testland/north/${m.city}/m-${run}-${i}`);
        const records = moments.map((m, i) => ({
          payload: {
            path: paths[i],
            event_name: `m ${i}`,
            tags: m.tags,
            status: m.status,
            visibility: m.visibility,
            edges: m.edges
              .map((edge) => ({ target: paths[edge.to % moments.length], type: edge.type, weight: edge.weight }))
              .filter((edge) => edge.target !== paths[i]),
          },
        }));
        const ingest = await h.post('/ingest/tdf', records, writer);
        assert.equal(ingest.status, 200, JSON.stringify(ingest.body));

        const graph = h.instance.graph;
        const rows = await Promise.all(paths.map(async (path) => [path, Number((await graph.moment(path, true))!.id)] as const));
        const idOf = new Map(rows);
        const pathOf = new Map(rows.map(([path, id]) => [id, path]));
        const sql = graph.repository.adjacency.sqlNeighbors;
        const weights = moments.flatMap((m) => m.edges.map((edge) => edge.weight));
        const published = moments.map((m) => m.status !== 'pending' && m.visibility === 'public');

        for (const query of queries) {
          const from = query.from % moments.length;
          const to = query.to % moments.length;
          if (!published[from] || !published[to]) continue;
          const minWeight =
            typeof query.minWeight === 'number'
              ? query.minWeight
              : Math.min(1, Math.max(0, (weights[query.minWeight[0] % Math.max(1, weights.length)] ?? 0.5) + query.minWeight[1]));
          const options = { direction: query.direction, depth: query.depth, types: query.types, limit: query.limit, minWeight };

          const reply = await h.get(
            `/api/v1/graph/traverse/${paths[from]!.slice(1)}?direction=${query.direction}&depth=${query.depth}&edge_types=${query.types.join(',')}&limit=${query.limit}&min_weight=${minWeight}`,
            serviceKey,
          );
          assert.equal(reply.status, 200, JSON.stringify(reply.body));
          const bySql = await traverse(sql, idOf.get(paths[from]!)!, options);
          const sqlNodes = Object.fromEntries([...bySql.hops].map(([id, hop]) => [pathOf.get(id) ?? `#${id}`, hop]));
          const apiNodes = Object.fromEntries((reply.body.nodes as Array<{ id: string; hop: number }>).map((node) => [node.id, node.hop]));
          // Moments of other runs are reachable too (automatic links): compare within this run's moments.
          const mine = (nodes: Record<string, number>) =>
            Object.fromEntries(
              Object.entries(nodes)
                .filter(([path]) => paths.includes(path))
                .sort(),
            );
          assert.equal(reply.body.truncated, bySql.truncated, `truncated (${JSON.stringify(options)})`);
          assert.deepEqual(mine(apiNodes), mine(sqlNodes), `traverse from ${paths[from]} ${JSON.stringify(options)}`);
          assert.equal(Object.keys(apiNodes).length, bySql.hops.size);
          const edgeKey = (edge: { source: string; target: string; type: string }) => `${edge.source}>${edge.target}:${edge.type}`;
          const within = (edge: { source: string; target: string }) => paths.includes(edge.source) && paths.includes(edge.target);
          assert.deepEqual(
            (reply.body.edges as Array<{ source: string; target: string; type: string }>).filter(within).map(edgeKey).sort(),
            bySql.edges
              .map((edge) => ({ source: pathOf.get(edge.source) ?? '', target: pathOf.get(edge.target) ?? '', type: EDGE_TYPES[edge.type]! }))
              .filter(within)
              .map(edgeKey)
              .sort(),
          );
          assert.equal(reply.body.edges.length, bySql.edges.length);

          const pathReply = await h.get(
            `/api/v1/graph/path?from=${paths[from]}&to=${paths[to]}&max_hops=${query.maxHops}&edge_types=${query.types.join(',')}`,
            serviceKey,
          );
          assert.equal(pathReply.status, 200, JSON.stringify(pathReply.body));
          const sqlPath = await shortestPath(sql, idOf.get(paths[from]!)!, idOf.get(paths[to]!)!, { maxHops: query.maxHops, types: query.types });
          assert.equal(pathReply.body.found, sqlPath.found, `path ${paths[from]} → ${paths[to]}`);
          if (sqlPath.found) assert.equal(pathReply.body.nodes.length, sqlPath.nodes.length, 'the same length');
        }
      }),
      propertyParameters(8),
    );
  });
});
