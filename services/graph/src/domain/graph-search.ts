import { type Direction, directionPlan, type EdgeType, IN, OUT, typeCode } from './edge-types.ts';

/** One edge met while expanding a node: `from` is the node expanded, `to` its neighbour. */
export interface Step {
  from: number;
  to: number;
  type: number;
  weight: number;
  /** True when the edge is stored from → to; false when stored to → from. */
  outgoing: boolean;
  /** False when the edge is known to have no theme or description, so there is nothing to look up. */
  detailed: boolean;
}

/**
 * Whatever can list the neighbours of a set of moments: the in-memory adjacency index, or SQL while
 * the index loads. Both serve the same two algorithms below, so their answers cannot differ.
 * `plan[typeCode]` says which stored directions (OUT, IN) to follow for each type; 0 means skip it.
 */
export interface NeighborSource {
  /**
   * Returns a new array the caller may reorder. With `within`, only the steps to those moments: a traversal
   * that has reached its limit needs just the edges among the moments it holds.
   */
  expand(frontier: readonly number[], plan: Uint8Array, minWeight: number, within?: ReadonlyMap<number, unknown>): Promise<Step[]> | Step[];
}

export interface StoredEdge {
  source: number;
  target: number;
  type: number;
  weight: number;
  /** Has a theme or description (curated edges); automatic links have neither. */
  detailed?: boolean;
}

const stored = (step: Step): StoredEdge =>
  step.outgoing
    ? { source: step.from, target: step.to, type: step.type, weight: step.weight, detailed: step.detailed }
    : { source: step.to, target: step.from, type: step.type, weight: step.weight, detailed: step.detailed };

/** Numeric while ids fit in 24 bits (a number key hashes far faster than a string), a string beyond. */
const edgeKey = (edge: StoredEdge): number | string =>
  edge.source < 0x1000000 && edge.target < 0x1000000 ? (edge.source * 0x1000000 + edge.target) * 16 + edge.type : `${edge.source}:${edge.target}:${edge.type}`;

/** Strongest edges first, then lower ids, so truncation keeps the most relevant moments deterministically. */
const byRelevance = (a: Step, b: Step) => b.weight - a.weight || a.to - b.to || a.type - b.type || a.from - b.from;

export interface TraverseResult {
  /** Moment id → hop (BFS level at which it was first reached). Insertion order is BFS order. */
  hops: Map<number, number>;
  edges: StoredEdge[];
  truncated: boolean;
}

export async function traverse(
  source: NeighborSource,
  anchor: number,
  options: { direction: Direction; depth: number; types: readonly EdgeType[]; limit: number; minWeight: number },
): Promise<TraverseResult> {
  const plan = directionPlan(options.types, options.direction);
  const hops = new Map<number, number>([[anchor, 0]]);
  const edges = new Map<number | string, StoredEdge>();
  let truncated = false;
  let frontier = [anchor];
  for (let level = 1; level <= options.depth && frontier.length > 0; level += 1) {
    // Once the limit has clipped, no moment can join: only the edges among the moments held are wanted.
    const steps = (await source.expand(frontier, plan, options.minWeight, truncated ? hops : undefined)).sort(byRelevance);
    const next: number[] = [];
    for (const step of steps) {
      if (!hops.has(step.to)) {
        if (hops.size >= options.limit) {
          truncated = true;
          continue;
        }
        hops.set(step.to, level);
        next.push(step.to);
      }
      const edge = stored(step);
      edges.set(edgeKey(edge), edge);
    }
    frontier = next;
  }
  return { hops, edges: [...edges.values()], truncated };
}

export interface PathResult {
  found: boolean;
  /** Moment ids from `from` to `to`. */
  nodes: number[];
  /** Stored edges along the path, in path order. */
  edges: StoredEdge[];
}

interface Visit {
  distance: number;
  /** The step that reached this node from its parent, absent at the root. */
  via?: Step;
}

/**
 * Shortest path by bidirectional breadth-first search over undirected edges. Each round expands one
 * whole level of the smaller side; the first round that meets the other side takes the meeting node with
 * the least total distance, which is a shortest path.
 */
export async function shortestPath(
  source: NeighborSource,
  from: number,
  to: number,
  options: { maxHops: number; types: readonly EdgeType[] },
): Promise<PathResult> {
  if (from === to) return { found: true, nodes: [from], edges: [] };
  const plan = new Uint8Array(directionPlan([], 'both').length);
  for (const type of options.types) plan[typeCode(type)] = OUT | IN;

  const forward = new Map<number, Visit>([[from, { distance: 0 }]]);
  const backward = new Map<number, Visit>([[to, { distance: 0 }]]);
  let forwardFrontier = [from];
  let backwardFrontier = [to];
  let forwardDepth = 0;
  let backwardDepth = 0;

  while (forwardFrontier.length > 0 && backwardFrontier.length > 0 && forwardDepth + backwardDepth < options.maxHops) {
    const expandForward = forwardFrontier.length <= backwardFrontier.length;
    const [own, other, frontier] = expandForward ? [forward, backward, forwardFrontier] : [backward, forward, backwardFrontier];
    const depth = (expandForward ? forwardDepth : backwardDepth) + 1;
    // Each newly reached node keeps its most relevant parent edge, chosen in one pass rather than by
    // sorting every step: the choice, and so the path, does not depend on the order steps arrive in.
    const parents = new Map<number, Step>();
    for (const step of await source.expand(frontier, plan, 0)) {
      if (own.has(step.to)) continue;
      const current = parents.get(step.to);
      if (!current || byRelevance(step, current) < 0) parents.set(step.to, step);
    }
    const next: number[] = [];
    let meeting: number | undefined;
    let best = Number.POSITIVE_INFINITY;
    for (const [node, step] of parents) {
      own.set(node, { distance: depth, via: step });
      next.push(node);
      const there = other.get(node);
      if (there && (depth + there.distance < best || (depth + there.distance === best && node < meeting!))) {
        best = depth + there.distance;
        meeting = node;
      }
    }
    if (expandForward) {
      forwardFrontier = next;
      forwardDepth = depth;
    } else {
      backwardFrontier = next;
      backwardDepth = depth;
    }
    if (meeting !== undefined && best <= options.maxHops) return assemble(forward, backward, meeting);
  }
  return { found: false, nodes: [], edges: [] };
}

function assemble(forward: Map<number, Visit>, backward: Map<number, Visit>, meeting: number): PathResult {
  const nodes: number[] = [meeting];
  const edges: StoredEdge[] = [];
  for (let visit = forward.get(meeting); visit?.via; visit = forward.get(visit.via.from)) {
    nodes.unshift(visit.via.from);
    edges.unshift(stored(visit.via));
  }
  for (let visit = backward.get(meeting); visit?.via; visit = backward.get(visit.via.from)) {
    nodes.push(visit.via.from);
    edges.push(stored(visit.via));
  }
  return { found: true, nodes, edges };
}
