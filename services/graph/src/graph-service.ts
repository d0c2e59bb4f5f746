import type { Logger } from '@tempora/kit/logger';
import { AdjacencyIndex, IndexBuilder } from './domain/adjacency-index.ts';
import type { ChangeFeed } from './change-feed.ts';
import type { Direction, EdgeType } from './domain/edge-types.ts';
import { shortestPath, traverse, type NeighborSource, type StoredEdge } from './domain/graph-search.ts';
import type { MomentInput } from './domain/moment.ts';
import { NODE_COLUMNS, type GraphRepository, type MomentRow } from './repository.ts';
import { nodeView, storedEdgeView } from './views.ts';

export interface GraphStats {
  total_nodes: number;
  total_edges: number;
  layer_counts: Record<string, number>;
  edge_type_counts: Record<string, number>;
  source_type_counts: Record<string, number>;
  date_range: { min_year: number | null; max_year: number | null };
  avg_confidence: number;
  last_updated: string | null;
  nodes_with_images: number;
}

export class MomentNotFound extends Error {
  readonly path: string;
  constructor(path: string) {
    super(`no moment at ${path}`);
    this.path = path;
  }
}

export interface GraphServiceSettings {
  autoLinkMaxPerType: number;
  /** Overlay share at which the index is rebuilt from PostgreSQL. */
  rebuildRatio: number;
}

/**
 * The graph's behaviour, independent of HTTP and MCP: reads, traversal and path over the in-memory
 * adjacency index (or SQL until it has loaded), and writes that keep the index current here and, through
 * the change feed, on every other replica.
 */
export class GraphService {
  private index: AdjacencyIndex | undefined;
  private loading: Promise<void> | undefined;
  readonly repository: GraphRepository;
  private readonly feed: ChangeFeed;
  private readonly settings: GraphServiceSettings;
  private readonly logger: Logger;
  /** Moments changed while a rebuild was reading edges; replayed onto the new index. */
  private pendingDuringLoad: number[] | undefined;

  constructor(repository: GraphRepository, feed: ChangeFeed, settings: GraphServiceSettings, logger: Logger) {
    this.repository = repository;
    this.feed = feed;
    this.settings = settings;
    this.logger = logger;
  }

  /** Subscribes to other replicas' changes and loads the index in the background. */
  async start(): Promise<void> {
    await this.feed.subscribe(
      (ids) => void this.refresh(ids),
      () => void this.rebuild(),
    );
    void this.rebuild();
  }

  /** Resolves when the index in use is current (tests and benchmarks wait on it). */
  async ready(): Promise<void> {
    while (this.loading) await this.loading;
  }

  get indexStats(): { loaded: boolean; edges: number; memoryBytes: number } {
    return { loaded: Boolean(this.index), edges: this.index?.edgeCount ?? 0, memoryBytes: this.index?.memoryBytes ?? 0 };
  }

  private get neighbors(): NeighborSource {
    return this.index ?? this.repository.sqlNeighbors;
  }

  rebuild(): Promise<void> {
    this.loading ??= (async () => {
      const started = performance.now();
      this.pendingDuringLoad = [];
      try {
        const builder = new IndexBuilder();
        const { hidden, maxNode } = await this.repository.loadEdges(builder);
        const index = builder.freeze(hidden, maxNode);
        const replay = this.pendingDuringLoad;
        this.pendingDuringLoad = undefined;
        if (replay.length > 0) {
          const change = await this.repository.adjacencyOf([...new Set(replay)]);
          index.refresh(change.moments, change.edges);
        }
        this.index = index;
        this.logger.info({ edges: index.edgeCount, memoryBytes: index.memoryBytes, ms: Math.round(performance.now() - started) }, 'adjacency index loaded');
      } catch (error) {
        this.logger.error({ err: error }, 'adjacency index load failed; answering from SQL');
        this.pendingDuringLoad = undefined;
      } finally {
        this.loading = undefined;
      }
    })();
    return this.loading;
  }

  /** Brings the index up to date for moments whose adjacency changed (here or on another replica). */
  private async refresh(ids: readonly number[]): Promise<void> {
    if (ids.length === 0) return;
    this.pendingDuringLoad?.push(...ids);
    const index = this.index;
    if (!index) return;
    const change = await this.repository.adjacencyOf(ids);
    index.refresh(change.moments, change.edges);
    if (index.overlayRatio > this.settings.rebuildRatio && !this.loading) void this.rebuild();
  }

  // ---- writes ----

  async writeMoments(inputs: readonly MomentInput[]): Promise<{ paths: string[]; created: number }> {
    const { ids, created } = await this.repository.writeMoments(inputs, { maxPerType: this.settings.autoLinkMaxPerType });
    this.statsCache = undefined;
    await this.refresh(ids);
    await this.feed.publish(ids);
    return { paths: inputs.map((input) => input.path), created };
  }

  private statsCache: { at: number; value: Promise<GraphStats> } | undefined;

  /** Aggregates over the whole table are cached briefly; a write on this replica clears the cache. */
  stats(maxAgeMs = 10_000): Promise<GraphStats> {
    if (!this.statsCache || performance.now() - this.statsCache.at > maxAgeMs) {
      const value = this.repository.stats().then(
        (raw): GraphStats => ({
          total_nodes: Number(raw.totals.total_nodes ?? 0),
          total_edges: raw.edgeTypes.reduce((sum, row) => sum + row.count, 0),
          layer_counts: Object.fromEntries(raw.layers.map((row) => [String(row.layer), row.count])),
          edge_type_counts: Object.fromEntries(raw.edgeTypes.map((row) => [row.type, row.count])),
          source_type_counts: Object.fromEntries(raw.sources.map((row) => [row.source, row.count])),
          date_range: {
            min_year: raw.totals.min_year === null ? null : Number(raw.totals.min_year),
            max_year: raw.totals.max_year === null ? null : Number(raw.totals.max_year),
          },
          avg_confidence: Math.round(Number(raw.totals.avg_confidence ?? 0) * 1e4) / 1e4,
          last_updated: raw.totals.last_updated ? new Date(raw.totals.last_updated).toISOString() : null,
          nodes_with_images: Number(raw.totals.nodes_with_images ?? 0),
        }),
      );
      this.statsCache = { at: performance.now(), value };
      value.catch(() => {
        this.statsCache = undefined;
      });
    }
    return this.statsCache.value;
  }

  async queueRender(input: MomentInput, job: { requestedBy: string; request: Record<string, unknown> }) {
    const result = await this.repository.queueRender(input, job, { maxPerType: this.settings.autoLinkMaxPerType });
    if (result.touched.length > 0) {
      this.statsCache = undefined;
      await this.refresh(result.touched);
      await this.feed.publish(result.touched);
    }
    return result;
  }

  // ---- graph queries ----

  private async anchor(path: string): Promise<MomentRow> {
    const row = await this.repository.momentByPath(path, false);
    if (!row) throw new MomentNotFound(path);
    return row;
  }

  async traverse(path: string, options: { direction: Direction; depth: number; types: EdgeType[]; limit: number; minWeight: number }) {
    const anchor = await this.anchor(path);
    const result = await traverse(this.neighbors, anchor.id, options);
    const ids = [...result.hops.keys()];
    const [moments, details] = await Promise.all([this.repository.momentsByIds(ids, NODE_COLUMNS), this.repository.edgeDetails(result.edges)]);
    const nodes = ids.flatMap((id) => {
      const row = moments.get(id);
      return row ? [nodeView(row, result.hops.get(id) ?? 0)] : [];
    });
    const edges = result.edges.map((edge) => storedEdgeView(edge, moments, details));
    return {
      anchor: anchor.path,
      direction: options.direction,
      depth: options.depth,
      edge_types: options.types,
      limit: options.limit,
      nodes,
      edges,
      node_count: nodes.length,
      edge_count: edges.length,
      truncated: result.truncated,
    };
  }

  async path(from: string, to: string, options: { maxHops: number; types: EdgeType[] }) {
    const [start, end] = await Promise.all([this.anchor(from), this.anchor(to)]);
    const result = await shortestPath(this.neighbors, start.id, end.id, options);
    const base = { from: start.path, to: end.path, max_hops: options.maxHops, edge_types: options.types };
    if (!result.found) return { found: false, ...base, hops: 0, nodes: [], edges: [] };
    const [moments, details] = await Promise.all([this.repository.momentsByIds(result.nodes, NODE_COLUMNS), this.repository.edgeDetails(result.edges)]);
    return {
      found: true,
      ...base,
      hops: result.edges.length,
      nodes: result.nodes.map((id, position) => nodeView(moments.get(id)!, position)),
      edges: result.edges.map((edge: StoredEdge) => storedEdgeView(edge, moments, details)),
    };
  }
}
