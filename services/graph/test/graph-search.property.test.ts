import assert from 'node:assert/strict';
import fc from 'fast-check';
import { propertyParameters, propertyTimeout } from '../../../test/support/properties.ts';
import { type AdjacencyIndex, IndexBuilder, type IndexedEdge } from '../src/domain/adjacency-index.ts';
import { type Direction, EDGE_TYPES, type EdgeType } from '../src/domain/edge-types.ts';
import { type StoredEdge, shortestPath, traverse } from '../src/domain/graph-search.ts';

/**
 * Traverse and path on the adjacency index (built, then changed through `refresh` as writes and other
 * replicas change it) against a breadth-first search written plainly from the spec's tables.
 */

interface Edge extends IndexedEdge {
  typeName: EdgeType;
}

interface Graph {
  nodes: number;
  edges: Edge[];
  hidden: Set<number>;
}

// The spec's direction table (platform-interface.md, GET /api/v1/graph/traverse), as written there.
const SYMMETRIC = new Set<EdgeType>(['contemporaneous', 'same_era', 'same_location', 'same_conflict', 'same_figure', 'thematic', 'challenges']);
const FUTURE_OUT = new Set<EdgeType>(['causes', 'precedes', 'influences']);
const FUTURE_IN = new Set<EdgeType>(['caused_by', 'follows']);

function followsOut(type: EdgeType, direction: Direction): boolean {
  if (SYMMETRIC.has(type) || direction === 'both') return true;
  return direction === 'future' ? FUTURE_OUT.has(type) : FUTURE_IN.has(type);
}
function followsIn(type: EdgeType, direction: Direction): boolean {
  if (SYMMETRIC.has(type) || direction === 'both') return true;
  return direction === 'future' ? FUTURE_IN.has(type) : FUTURE_OUT.has(type);
}

interface Move {
  to: number;
  edge: Edge;
}

/** Every way out of `node` that a walk with these rules may take. */
function moves(
  graph: Graph,
  node: number,
  types: ReadonlySet<EdgeType>,
  allows: { out: (type: EdgeType) => boolean; in: (type: EdgeType) => boolean },
  minWeight: number,
): Move[] {
  const result: Move[] = [];
  for (const edge of graph.edges) {
    if (!types.has(edge.typeName) || !(edge.weight >= minWeight)) continue;
    if (edge.source === node && allows.out(edge.typeName) && !graph.hidden.has(edge.target)) result.push({ to: edge.target, edge });
    if (edge.target === node && allows.in(edge.typeName) && !graph.hidden.has(edge.source)) result.push({ to: edge.source, edge });
  }
  return result;
}

function bfs(start: number, next: (node: number) => Move[]): Map<number, number> {
  const distance = new Map([[start, 0]]);
  const queue = [start];
  while (queue.length > 0) {
    const node = queue.shift()!;
    for (const move of next(node)) {
      if (!distance.has(move.to)) {
        distance.set(move.to, distance.get(node)! + 1);
        queue.push(move.to);
      }
    }
  }
  return distance;
}

const key = (edge: Pick<StoredEdge, 'source' | 'target' | 'type'>) => `${edge.source}>${edge.target}:${edge.type}`;

/** A random graph: edges as the database holds them (symmetric ones once, from the lower id; no duplicates). */
const graphArbitrary = fc
  .record({
    nodes: fc.integer({ min: 1, max: 14 }),
    raw: fc.array(fc.record({ a: fc.nat(), b: fc.nat(), type: fc.constantFrom(...EDGE_TYPES), weight: fc.constantFrom(0.1, 0.3, 0.5, 0.7, 0.9, 1) }), {
      maxLength: 40,
    }),
    hiddenPicks: fc.array(fc.nat(), { maxLength: 3 }),
  })
  .map(({ nodes, raw, hiddenPicks }): Graph => {
    const edges = new Map<string, Edge>();
    raw.forEach(({ a, b, type, weight }, index) => {
      let [source, target] = [a % nodes, b % nodes];
      if (source === target) return;
      if (SYMMETRIC.has(type) && source > target) [source, target] = [target, source];
      const edge = { id: index + 1, source, target, type: EDGE_TYPES.indexOf(type), typeName: type, weight: Math.fround(weight), detailed: index % 2 === 0 };
      if (!edges.has(key(edge))) edges.set(key(edge), edge);
    });
    return { nodes, edges: [...edges.values()], hidden: new Set(hiddenPicks.map((pick) => pick % nodes)) };
  });

/**
 * The graph's index as a running service holds it: built from part of the graph (`frozen`), then brought
 * to the whole of it by `refresh` calls for the moments whose edges or visibility changed, in batches.
 */
const scenario = fc.record({ graph: graphArbitrary, seed: fc.array(fc.nat(), { minLength: 60, maxLength: 60 }) }).map(({ graph, seed }) => {
  let cursor = 0;
  const pick = (n: number) => seed[cursor++ % seed.length]! % n;
  // The build saw a subset of the edges, some stale weights, another visibility and perhaps fewer moments.
  const builtNodes = 1 + pick(graph.nodes);
  const stale = graph.edges
    .filter((edge) => edge.source < builtNodes && edge.target < builtNodes && pick(3) > 0)
    .map((edge) => ({ ...edge, weight: pick(2) ? edge.weight : Math.fround(0.2) }));
  // And perhaps an edge since deleted.
  const gone = graph.edges.length > 0 && pick(2) ? graph.edges[pick(graph.edges.length)]! : undefined;
  const extra =
    gone && gone.source < builtNodes && gone.target < builtNodes
      ? [
          {
            id: 10_000,
            source: Math.min(gone.source, gone.target),
            target: Math.max(gone.source, gone.target),
            type: EDGE_TYPES.indexOf('thematic'),
            typeName: 'thematic' as const,
            weight: gone.weight,
          },
        ]
      : [];
  if (extra.length > 0 && graph.edges.some((edge) => key(edge) === key(extra[0]!))) extra.pop();
  const builtHidden = new Set([...graph.hidden].filter(() => pick(2) > 0));
  const batches: number[][] = [];
  const changed = [...Array(graph.nodes).keys()].filter((node) => {
    const state = (edges: readonly Edge[]) =>
      edges
        .filter((edge) => edge.source === node || edge.target === node)
        .map((edge) => `${key(edge)}=${edge.weight}`)
        .sort()
        .join();
    const [now, before] = [state(graph.edges), state([...stale, ...extra])];
    return now !== before || graph.hidden.has(node) !== builtHidden.has(node) || pick(4) === 0;
  });
  for (const node of changed) {
    if (batches.length === 0 || pick(3) === 0) batches.push([]);
    batches[batches.length - 1]!.push(node);
    if (pick(5) === 0) batches.push([node]); // a replica may apply the same change twice
  }
  return { graph, built: { nodes: builtNodes, edges: [...stale, ...extra], hidden: builtHidden }, batches };
});

function buildIndex(built: { nodes: number; edges: readonly StoredEdge[]; hidden: ReadonlySet<number> }, graph: Graph, batches: number[][]): AdjacencyIndex {
  const builder = new IndexBuilder();
  for (const edge of built.edges) builder.add(edge);
  const index = builder.freeze(built.hidden, built.nodes - 1);
  for (const batch of batches) {
    const touching = graph.edges.filter((edge) => batch.includes(edge.source) || batch.includes(edge.target));
    index.refresh(
      batch.map((id) => ({ id, hidden: graph.hidden.has(id) })),
      touching,
    );
  }
  return index;
}

const traverseOptions = fc.record({
  direction: fc.constantFrom<Direction>('past', 'future', 'both'),
  depth: fc.integer({ min: 1, max: 4 }),
  types: fc.subarray([...EDGE_TYPES], { minLength: 1 }),
  limit: fc.oneof(fc.integer({ min: 2, max: 5 }), fc.integer({ min: 1, max: 16 })),
  minWeight: fc.constantFrom(0, 0.1, 0.3, 0.5, 0.9, 1),
});

describe('graph traverse and path: properties against a reference BFS', function () {
  this.timeout(propertyTimeout(20_000));

  it("the index, built and then refreshed, holds exactly the graph's edges", () => {
    fc.assert(
      fc.property(scenario, ({ graph, built, batches }) => {
        const index = buildIndex(built, graph, batches);
        assert.equal(index.edgeCount, graph.edges.length);
        for (let node = 0; node < graph.nodes; node += 1) assert.equal(index.isHidden(node), graph.hidden.has(node));
        const all = new Uint8Array(EDGE_TYPES.length).fill(3);
        const seen = index
          .expand([...Array(graph.nodes).keys()], all, 0)
          .filter((step) => step.outgoing)
          .map((step) => key({ source: step.from, target: step.to, type: step.type }));
        const expected = graph.edges.filter((edge) => !graph.hidden.has(edge.target)).map(key);
        assert.deepEqual(seen.sort(), expected.sort());
      }),
      propertyParameters(400),
    );
  });

  it('traverse reaches what the BFS reaches, at its hop, with its edges, clipped at the limit by weight', async () => {
    await fc.assert(
      fc.asyncProperty(scenario, traverseOptions, fc.nat(), async ({ graph, built, batches }, options, anchorPick) => {
        const anchor = anchorPick % graph.nodes;
        fc.pre(!graph.hidden.has(anchor));
        const index = buildIndex(built, graph, batches);
        const result = await traverse(index, anchor, options);

        const types = new Set(options.types);
        const bound = Math.fround(options.minWeight);
        const allows = { out: (type: EdgeType) => followsOut(type, options.direction), in: (type: EdgeType) => followsIn(type, options.direction) };
        const next = (node: number) => moves(graph, node, types, allows, bound);
        const distance = new Map([...bfs(anchor, next)].filter(([, hop]) => hop <= options.depth));

        assert.equal(result.hops.get(anchor), 0, 'the anchor, at hop 0');
        assert.equal(result.truncated, distance.size > options.limit, 'truncated exactly when the limit clipped');
        assert.equal(result.hops.size, Math.min(distance.size, options.limit));
        for (const [node, hop] of result.hops) assert.equal(hop, distance.get(node), `node ${node} at its BFS hop`);
        const last = Math.max(...result.hops.values());
        for (const [node, hop] of distance) if (hop < last) assert.ok(result.hops.has(node), `node ${node} (hop ${hop}) kept: only the last level is clipped`);
        if (result.truncated) {
          // The strongest edge into each moment of the clipped level decides which are kept.
          const strongest = (node: number) =>
            Math.max(
              ...[...result.hops]
                .filter(([, hop]) => hop === last - 1)
                .flatMap(([from]) => next(from))
                .filter((move) => move.to === node)
                .map((move) => move.edge.weight),
            );
          const kept = [...distance].filter(([node, hop]) => hop === last && result.hops.has(node)).map(([node]) => strongest(node));
          const dropped = [...distance].filter(([node, hop]) => hop === last && !result.hops.has(node)).map(([node]) => strongest(node));
          if (dropped.length > 0) assert.ok(Math.min(...kept) >= Math.max(...dropped), 'kept moments are reached by edges at least as strong as dropped ones');
        }
        const expectedEdges = [...result.hops]
          .filter(([, hop]) => hop < options.depth)
          .flatMap(([node]) => next(node))
          .filter((move) => result.hops.has(move.to))
          .map((move) => key(move.edge));
        assert.deepEqual(result.edges.map(key).sort(), [...new Set(expectedEdges)].sort(), 'the edges walked among the moments returned');
      }),
      propertyParameters(600),
    );
  });

  it('path finds a shortest undirected chain within max_hops, made of real edges, whatever order edges were built in', async () => {
    await fc.assert(
      fc.asyncProperty(
        scenario,
        fc.nat(),
        fc.nat(),
        fc.integer({ min: 1, max: 10 }),
        fc.subarray([...EDGE_TYPES], { minLength: 1 }),
        async ({ graph, built, batches }, fromPick, toPick, maxHops, typeList) => {
          const [from, to] = [fromPick % graph.nodes, toPick % graph.nodes];
          fc.pre(!graph.hidden.has(from) && !graph.hidden.has(to));
          const index = buildIndex(built, graph, batches);
          const result = await shortestPath(index, from, to, { maxHops, types: typeList });

          const types = new Set(typeList);
          const both = { out: () => true, in: () => true };
          const distance = bfs(from, (node) => moves(graph, node, types, both, 0)).get(to);
          const reachable = distance !== undefined && distance <= maxHops;
          assert.equal(result.found, reachable, `found ${result.found}; BFS distance ${distance}, max_hops ${maxHops}`);
          if (!result.found) return;
          assert.equal(result.nodes.length - 1, distance, 'a shortest chain');
          assert.equal(result.nodes[0], from);
          assert.equal(result.nodes.at(-1), to);
          assert.equal(new Set(result.nodes).size, result.nodes.length, 'no moment twice');
          assert.equal(result.edges.length, result.nodes.length - 1);
          const stored = new Map(graph.edges.map((edge) => [key(edge), edge]));
          result.edges.forEach((edge, i) => {
            const real = stored.get(key(edge));
            assert.ok(real && types.has(real.typeName), `edge ${key(edge)} exists with a listed type`);
            const ends = [edge.source, edge.target].sort().join();
            assert.equal(ends, [result.nodes[i]!, result.nodes[i + 1]!].sort().join(), 'edges join consecutive moments');
            assert.ok(!graph.hidden.has(result.nodes[i]!) || i === 0);
          });

          // The same graph built in the reverse order, without any refresh, gives the same chain.
          const reversed = new IndexBuilder();
          for (const edge of [...graph.edges].reverse()) reversed.add(edge);
          const again = await shortestPath(reversed.freeze(graph.hidden, graph.nodes - 1), from, to, { maxHops, types: typeList });
          assert.deepEqual(again.nodes, result.nodes);
        },
      ),
      propertyParameters(600),
    );
  });
});
