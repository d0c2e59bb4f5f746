import { IN, OUT } from './edge-types.ts';
import type { NeighborSource, Step, StoredEdge } from './graph-search.ts';

/** An edge as loaded from storage: its database id lets updates replace it exactly once. */
export interface IndexedEdge extends StoredEdge {
  id: number;
}

interface OverlayEdge {
  id: number;
  neighbor: number;
  /** The type code, with DETAILED set when the edge has a theme or description. */
  type: number;
  weight: number;
}

/** Type codes fit in 7 bits; the eighth marks edges with a theme or description. */
const DETAILED = 0x80;
const TYPE_MASK = 0x7f;
const packType = (edge: StoredEdge) => edge.type | (edge.detailed === false ? 0 : DETAILED);

/** Growable column of numbers, so a build never holds millions of row objects at once. */
class Column<T extends Int32Array | Uint8Array | Float32Array> {
  data: T;
  length = 0;
  private readonly make: (size: number) => T;
  constructor(make: (size: number) => T) {
    this.make = make;
    this.data = make(1024);
  }
  push(value: number): void {
    if (this.length === this.data.length) {
      const grown = this.make(this.data.length * 2);
      grown.set(this.data);
      this.data = grown;
    }
    this.data[this.length++] = value;
  }
}

/** Collects edges for a build; `freeze` turns them into an index. */
export class IndexBuilder {
  private readonly sources = new Column((n) => new Int32Array(n));
  private readonly targets = new Column((n) => new Int32Array(n));
  private readonly types = new Column((n) => new Uint8Array(n));
  private readonly weights = new Column((n) => new Float32Array(n));
  private maxNode = 0;

  add(edge: StoredEdge): void {
    this.sources.push(edge.source);
    this.targets.push(edge.target);
    this.types.push(packType(edge));
    this.weights.push(edge.weight);
    this.maxNode = Math.max(this.maxNode, edge.source, edge.target);
  }

  get size(): number {
    return this.sources.length;
  }

  freeze(hidden: Iterable<number>, maxNode = 0): AdjacencyIndex {
    const nodes = Math.max(this.maxNode, maxNode) + 1;
    const m = this.sources.length;
    const src = this.sources.data;
    const dst = this.targets.data;
    const out = csr(nodes, m, src, dst, this.types.data, this.weights.data);
    const inward = csr(nodes, m, dst, src, this.types.data, this.weights.data);
    return new AdjacencyIndex(out, inward, new Set(hidden));
  }
}

/** Compressed sparse rows: the neighbours of node n are positions offsets[n] .. offsets[n+1]-1. */
interface Csr {
  offsets: Int32Array;
  neighbors: Int32Array;
  types: Uint8Array;
  /** NaN marks an edge removed since the build: it fails every weight comparison, so it is never followed. */
  weights: Float32Array;
}

function csr(nodes: number, m: number, from: Int32Array, to: Int32Array, types: Uint8Array, weights: Float32Array): Csr {
  const offsets = new Int32Array(nodes + 1);
  for (let i = 0; i < m; i += 1) offsets[(from[i] as number) + 1]! += 1;
  for (let n = 0; n < nodes; n += 1) offsets[n + 1]! += offsets[n]!;
  const cursor = offsets.slice(0, nodes);
  const neighbors = new Int32Array(m);
  const edgeTypes = new Uint8Array(m);
  const edgeWeights = new Float32Array(m);
  for (let i = 0; i < m; i += 1) {
    const position = cursor[from[i] as number]!++;
    neighbors[position] = to[i] as number;
    edgeTypes[position] = types[i] as number;
    edgeWeights[position] = weights[i] as number;
  }
  return { offsets, neighbors, types: edgeTypes, weights: edgeWeights };
}

/**
 * The graph's adjacency in compact typed arrays, indexed by moment id: a frozen CSR in both directions
 * built from PostgreSQL, plus a small overlay for what changed since (kept current on every write, and
 * across replicas through LISTEN/NOTIFY). About 18 bytes per edge, so 10 million edges fit in ~180 MB.
 */
export class AdjacencyIndex implements NeighborSource {
  private readonly out: Csr;
  private readonly inward: Csr;
  private readonly hidden: Set<number>;
  private readonly overlayOut = new Map<number, OverlayEdge[]>();
  private readonly overlayIn = new Map<number, OverlayEdge[]>();
  private overlayEdges = 0;
  private removedBase = 0;

  constructor(out: Csr, inward: Csr, hidden: Set<number>) {
    this.out = out;
    this.inward = inward;
    this.hidden = hidden;
  }

  static empty(): AdjacencyIndex {
    return new IndexBuilder().freeze([]);
  }

  get edgeCount(): number {
    return this.out.neighbors.length - this.removedBase + this.overlayEdges;
  }

  /** Bytes held by the typed arrays and (estimated) by the overlay. */
  get memoryBytes(): number {
    const csrBytes = (c: Csr) => c.offsets.byteLength + c.neighbors.byteLength + c.types.byteLength + c.weights.byteLength;
    return csrBytes(this.out) + csrBytes(this.inward) + this.overlayEdges * 2 * 64;
  }

  /** Share of edges living in the overlay: past a threshold a rebuild is cheaper to query. */
  get overlayRatio(): number {
    return (this.overlayEdges + this.removedBase) / Math.max(1, this.out.neighbors.length);
  }

  isHidden(node: number): boolean {
    return this.hidden.has(node);
  }

  expand(frontier: readonly number[], plan: Uint8Array, minWeight: number, within?: ReadonlyMap<number, unknown>): Step[] {
    // Weights are held as float32; rounding the bound the same way keeps `weight >= min_weight` exact at the boundary.
    const bound = Math.fround(minWeight);
    const steps: Step[] = [];
    for (const node of frontier) {
      this.scan(this.out, this.overlayOut, node, OUT, true, plan, bound, within, steps);
      this.scan(this.inward, this.overlayIn, node, IN, false, plan, bound, within, steps);
    }
    return steps;
  }

  private scan(
    rows: Csr,
    overlay: Map<number, OverlayEdge[]>,
    node: number,
    flag: number,
    outgoing: boolean,
    plan: Uint8Array,
    minWeight: number,
    within: ReadonlyMap<number, unknown> | undefined,
    steps: Step[],
  ): void {
    // Most graphs hide nothing and have an empty overlay: skipping those lookups halves the cost of a scan.
    const hiddenAny = this.hidden.size !== 0;
    if (node + 1 < rows.offsets.length) {
      const end = rows.offsets[node + 1]!;
      for (let i = rows.offsets[node]!; i < end; i += 1) {
        const packed = rows.types[i]!;
        const type = packed & TYPE_MASK;
        const weight = rows.weights[i]!;
        if (!(plan[type]! & flag) || !(weight >= minWeight)) continue;
        const to = rows.neighbors[i]!;
        if ((hiddenAny && this.hidden.has(to)) || (within !== undefined && !within.has(to))) continue;
        steps.push({ from: node, to, type, weight, outgoing, detailed: packed >= DETAILED });
      }
    }
    const changed = overlay.size === 0 ? undefined : overlay.get(node);
    if (changed === undefined) return;
    for (const edge of changed) {
      const type = edge.type & TYPE_MASK;
      if (!(plan[type]! & flag) || !(edge.weight >= minWeight) || this.hidden.has(edge.neighbor) || (within !== undefined && !within.has(edge.neighbor)))
        continue;
      steps.push({ from: node, to: edge.neighbor, type, weight: edge.weight, outgoing, detailed: edge.type >= DETAILED });
    }
  }

  /**
   * Replaces everything the index knows about `moments` with their current state: visibility and every
   * edge touching them. Idempotent, so a replica may apply the same change twice.
   */
  refresh(moments: ReadonlyArray<{ id: number; hidden: boolean }>, edges: readonly IndexedEdge[]): void {
    for (const moment of moments) {
      if (moment.hidden) this.hidden.add(moment.id);
      else this.hidden.delete(moment.id);
      this.removeBaseEdgesOf(moment.id);
      for (const edge of [...(this.overlayOut.get(moment.id) ?? [])]) this.removeOverlay(moment.id, edge.neighbor, edge.id);
      for (const edge of [...(this.overlayIn.get(moment.id) ?? [])]) this.removeOverlay(edge.neighbor, moment.id, edge.id);
    }
    for (const edge of edges) {
      if ((this.overlayOut.get(edge.source) ?? []).some((existing) => existing.id === edge.id)) continue;
      // Held in single precision like the built rows: a weight of 0.3 kept in double precision would fall
      // below a min_weight of 0.3, whose bound is rounded to single precision.
      const weight = Math.fround(edge.weight);
      push(this.overlayOut, edge.source, { id: edge.id, neighbor: edge.target, type: packType(edge), weight });
      push(this.overlayIn, edge.target, { id: edge.id, neighbor: edge.source, type: packType(edge), weight });
      this.overlayEdges += 1;
    }
  }

  private removeBaseEdgesOf(node: number): void {
    if (node + 1 >= this.out.offsets.length) return;
    for (let i = this.out.offsets[node]!; i < this.out.offsets[node + 1]!; i += 1) {
      if (Number.isNaN(this.out.weights[i])) continue;
      this.out.weights[i] = Number.NaN;
      this.removedBase += 1;
      tombstone(this.inward, this.out.neighbors[i]!, node, this.out.types[i]!);
    }
    for (let i = this.inward.offsets[node]!; i < this.inward.offsets[node + 1]!; i += 1) {
      if (Number.isNaN(this.inward.weights[i])) continue;
      this.inward.weights[i] = Number.NaN;
      this.removedBase += 1;
      tombstone(this.out, this.inward.neighbors[i]!, node, this.inward.types[i]!);
    }
  }

  private removeOverlay(source: number, target: number, id: number): void {
    const before = this.overlayOut.get(source)?.length ?? 0;
    remove(this.overlayOut, source, id);
    remove(this.overlayIn, target, id);
    if ((this.overlayOut.get(source)?.length ?? 0) < before) this.overlayEdges -= 1;
  }
}

function tombstone(rows: Csr, node: number, neighbor: number, type: number): void {
  for (let i = rows.offsets[node]!; i < rows.offsets[node + 1]!; i += 1) {
    if (rows.neighbors[i] === neighbor && (rows.types[i]! & TYPE_MASK) === (type & TYPE_MASK) && !Number.isNaN(rows.weights[i])) {
      rows.weights[i] = Number.NaN;
      return;
    }
  }
}

function push(map: Map<number, OverlayEdge[]>, key: number, edge: OverlayEdge): void {
  const list = map.get(key);
  if (list) list.push(edge);
  else map.set(key, [edge]);
}

function remove(map: Map<number, OverlayEdge[]>, key: number, id: number): void {
  const list = map.get(key);
  if (!list) return;
  const kept = list.filter((edge) => edge.id !== id);
  if (kept.length === 0) map.delete(key);
  else map.set(key, kept);
}
