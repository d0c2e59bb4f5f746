import assert from 'node:assert/strict';
import { type AdjacencyIndex, IndexBuilder } from '../src/domain/adjacency-index.ts';
import { directionPlan, type EdgeType, IN, OUT, typeCode } from '../src/domain/edge-types.ts';
import { shortestPath, traverse } from '../src/domain/graph-search.ts';

const edge = (source: number, target: number, type: EdgeType, weight = 1) => ({ source, target, type: typeCode(type), weight });

function build(edges: ReturnType<typeof edge>[], hidden: number[] = []): AdjacencyIndex {
  const builder = new IndexBuilder();
  for (const e of edges) builder.add(e);
  return builder.freeze(hidden);
}

describe('graph search over the adjacency index', () => {
  it('plans directions per the spec table', () => {
    const future = directionPlan(['causes', 'caused_by', 'precedes', 'follows', 'influences'], 'future');
    assert.equal(future[typeCode('causes')], OUT);
    assert.equal(future[typeCode('precedes')], OUT);
    assert.equal(future[typeCode('influences')], OUT);
    assert.equal(future[typeCode('caused_by')], IN);
    assert.equal(future[typeCode('follows')], IN);
    const past = directionPlan(['causes', 'caused_by', 'precedes', 'follows', 'influences'], 'past');
    assert.equal(past[typeCode('causes')], IN);
    assert.equal(past[typeCode('caused_by')], OUT);
    assert.equal(directionPlan(['causes'], 'both')[typeCode('causes')], OUT | IN);
    assert.equal(directionPlan(['same_figure'], 'future')[typeCode('same_figure')], OUT | IN);
    assert.equal(future[typeCode('same_figure')], 0, 'symmetric types only when listed');
  });

  it('assigns hop as the BFS level of first reach and records edges among reached nodes', async () => {
    // 1 → 2 → 3 → 4, and 1 → 3 directly: 3 is reached at hop 1.
    const index = build([edge(1, 2, 'causes'), edge(2, 3, 'causes'), edge(3, 4, 'causes'), edge(1, 3, 'causes', 0.5)]);
    const result = await traverse(index, 1, { direction: 'future', depth: 4, types: ['causes'], limit: 100, minWeight: 0 });
    assert.deepEqual(Object.fromEntries(result.hops), { 1: 0, 2: 1, 3: 1, 4: 2 });
    assert.equal(result.edges.length, 4);
    assert.equal(result.truncated, false);
  });

  it('truncates at the node limit, keeping the strongest edges first', async () => {
    const index = build([edge(1, 2, 'causes', 0.2), edge(1, 3, 'causes', 0.9), edge(1, 4, 'causes', 0.5)]);
    const result = await traverse(index, 1, { direction: 'both', depth: 2, types: ['causes'], limit: 3, minWeight: 0 });
    assert.deepEqual([...result.hops.keys()], [1, 3, 4]);
    assert.equal(result.truncated, true);
    assert.ok(result.edges.every((e) => result.hops.has(e.source) && result.hops.has(e.target)));
  });

  it('filters by min_weight exactly at the boundary despite float32 storage', async () => {
    const index = build([edge(1, 2, 'causes', 0.7), edge(1, 3, 'causes', 0.69)]);
    const result = await traverse(index, 1, { direction: 'future', depth: 1, types: ['causes'], limit: 10, minWeight: 0.7 });
    assert.deepEqual([...result.hops.keys()], [1, 2]);
  });

  it('filters edges written after the build at the boundary too (found by the index-vs-SQL property)', async () => {
    const index = build([edge(1, 2, 'thematic', 0.3)]);
    index.refresh(
      [{ id: 1, hidden: false }],
      [
        { id: 1, ...edge(1, 2, 'thematic', 0.3) },
        { id: 2, ...edge(1, 3, 'thematic', 0.3) },
      ],
    );
    const result = await traverse(index, 1, { direction: 'future', depth: 1, types: ['thematic'], limit: 10, minWeight: 0.3 });
    assert.deepEqual([...result.hops.keys()].sort(), [1, 2, 3]);
  });

  it('skips hidden (private) moments', async () => {
    const index = build([edge(1, 2, 'causes'), edge(2, 3, 'causes')], [2]);
    const result = await traverse(index, 1, { direction: 'future', depth: 3, types: ['causes'], limit: 10, minWeight: 0 });
    assert.deepEqual([...result.hops.keys()], [1]);
  });

  it('finds shortest paths bidirectionally, treating edges as undirected', async () => {
    // 1 - 2 - 3 - 4 - 5 - 6 (mixed directions) and a longer detour 1 - 7 - 8 - 9 - 10 - 11 - 6.
    const index = build([
      edge(1, 2, 'causes'),
      edge(3, 2, 'caused_by'),
      edge(3, 4, 'precedes'),
      edge(5, 4, 'follows'),
      edge(5, 6, 'influences'),
      edge(1, 7, 'causes'),
      edge(7, 8, 'causes'),
      edge(8, 9, 'causes'),
      edge(9, 10, 'causes'),
      edge(10, 11, 'causes'),
      edge(11, 6, 'causes'),
    ]);
    const types: EdgeType[] = ['causes', 'caused_by', 'precedes', 'follows', 'influences'];
    const found = await shortestPath(index, 1, 6, { maxHops: 10, types });
    assert.equal(found.found, true);
    assert.deepEqual(found.nodes, [1, 2, 3, 4, 5, 6]);
    assert.deepEqual(
      found.edges.map((e) => [e.source, e.target]),
      [
        [1, 2],
        [3, 2],
        [3, 4],
        [5, 4],
        [5, 6],
      ],
    );
    assert.equal((await shortestPath(index, 1, 6, { maxHops: 4, types })).found, false);
    assert.equal((await shortestPath(index, 1, 6, { maxHops: 5, types })).found, true);
    assert.equal((await shortestPath(index, 1, 6, { maxHops: 10, types: ['causes'] })).nodes.length, 7, 'only causes: the detour');
    assert.deepEqual(await shortestPath(index, 4, 4, { maxHops: 1, types }), { found: true, nodes: [4], edges: [] });
  });

  it('finds an even-length path where both frontiers meet', async () => {
    const index = build([edge(1, 2, 'causes'), edge(2, 3, 'causes'), edge(3, 4, 'causes'), edge(4, 5, 'causes')]);
    const result = await shortestPath(index, 1, 5, { maxHops: 4, types: ['causes'] });
    assert.deepEqual(result.nodes, [1, 2, 3, 4, 5]);
  });

  it('refreshes moments after writes: new edges, changed edges, hidden moments', async () => {
    const index = build([edge(1, 2, 'causes', 0.9), edge(2, 3, 'causes', 0.9)]);
    index.refresh(
      [{ id: 2, hidden: false }],
      [
        { id: 10, source: 1, target: 2, type: typeCode('causes'), weight: 0.4 },
        { id: 11, source: 2, target: 5, type: typeCode('precedes'), weight: 0.6 },
      ],
    );
    const after = await traverse(index, 1, { direction: 'future', depth: 2, types: ['causes', 'precedes'], limit: 10, minWeight: 0 });
    assert.deepEqual(Object.fromEntries(after.hops), { 1: 0, 2: 1, 5: 2 }, '2 → 3 was removed with the refresh of 2');
    assert.equal(after.edges.find((e) => e.source === 1)?.weight.toFixed(1), '0.4');
    index.refresh(
      [{ id: 2, hidden: false }],
      [
        { id: 10, source: 1, target: 2, type: typeCode('causes'), weight: 0.4 },
        { id: 11, source: 2, target: 5, type: typeCode('precedes'), weight: 0.6 },
      ],
    );
    assert.equal(index.edgeCount, 2, 'a refresh applied twice changes nothing');
    index.refresh([{ id: 5, hidden: true }], []);
    const hidden = await traverse(index, 1, { direction: 'future', depth: 2, types: ['causes', 'precedes'], limit: 10, minWeight: 0 });
    assert.deepEqual([...hidden.hops.keys()], [1, 2]);
  });
});
