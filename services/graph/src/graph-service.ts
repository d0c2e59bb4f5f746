import { SEGMENTS } from '@tempora/kit/moments';
import type { Logger } from '@tempora/kit/observability';
import type { ChangeFeed } from './change-feed.ts';
import { type AdjacencyIndex, IndexBuilder } from './domain/adjacency-index.ts';
import type { Direction, EdgeType } from './domain/edge-types.ts';
import { FIGURE_KEYS_VERSION, figureKeys } from './domain/figure-names.ts';
import { type NeighborSource, type StoredEdge, shortestPath, traverse } from './domain/graph-search.ts';
import type { EdgeInput, MomentInput } from './domain/moment.ts';
import { NodeStore } from './domain/node-store.ts';
import {
  type AdjacencyChange,
  type EdgeRow,
  type GraphRepository,
  type MomentFilters,
  type MomentPage,
  type MomentRow,
  NODE_COLUMNS,
  type RenderJobRow,
} from './repository/index.ts';
import { type NodeView, nodeView, storedEdgeView } from './views.ts';

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

/** Applies a change read from PostgreSQL to the in-memory graph. */
function apply(memory: MemoryGraph, change: AdjacencyChange): void {
  memory.index.refresh(change.moments, change.edges);
  for (const moment of change.moments) {
    if (moment.hidden || !moment.node) memory.nodes.remove(moment.id);
    else memory.nodes.set(moment.node);
  }
}

/** The in-memory graph: adjacency and the nodes' fields, built and kept current together. */
interface MemoryGraph {
  index: AdjacencyIndex;
  nodes: NodeStore;
}

/** A child of a browsed prefix; at the city level each child is a moment, given in `moment`. */
export interface BrowseChild {
  segment: string;
  path: string;
  count: number;
  moment?: MomentRow;
}

/**
 * The graph's behaviour, independent of HTTP and MCP: reads, traversal and path over the in-memory
 * adjacency index (or SQL until it has loaded), and writes that keep the index current here and, through
 * the change feed, on every other replica. Routes and MCP tools reach the stored graph only through it;
 * `repository` is public for the background workers' own tables (render jobs, spend, claims).
 */
export class GraphService {
  private memory: MemoryGraph | undefined;
  private loading: Promise<void> | undefined;
  readonly repository: GraphRepository;
  private readonly feed: ChangeFeed;
  private readonly settings: GraphServiceSettings;
  private readonly logger: Logger;
  /** How long the last completed load of the index took (0 before the first). */
  private loadSeconds = 0;
  /** Moments changed while a rebuild was reading edges; replayed onto the new index. */
  private pendingDuringLoad: number[] | undefined;
  /** The last refresh queued; the next one starts when it has applied. */
  private refreshes: Promise<void> = Promise.resolve();

  constructor(repository: GraphRepository, feed: ChangeFeed, settings: GraphServiceSettings, logger: Logger) {
    this.repository = repository;
    this.feed = feed;
    this.settings = settings;
    this.logger = logger;
  }

  /** Subscribes to other replicas' changes and loads the index in the background. */
  async start(): Promise<void> {
    await this.feed.subscribe(
      (ids) => void this.refresh(ids).catch((error: unknown) => this.logger.error({ err: error }, 'refreshing the index after another replica wrote failed')),
      () => void this.rebuild(),
    );
    void this.rebuild();
  }

  /** Resolves when the index in use is current (tests and benchmarks wait on it). */
  async ready(): Promise<void> {
    while (this.loading) await this.loading;
  }

  get indexStats(): { loaded: boolean; edges: number; memoryBytes: number; nodes: number; nodeMemoryBytes: number; loadSeconds: number } {
    const memory = this.memory;
    return {
      loaded: Boolean(memory),
      loadSeconds: this.loadSeconds,
      edges: memory?.index.edgeCount ?? 0,
      memoryBytes: memory?.index.memoryBytes ?? 0,
      nodes: memory?.nodes.size ?? 0,
      nodeMemoryBytes: memory?.nodes.memoryBytes ?? 0,
    };
  }

  private get neighbors(): NeighborSource {
    return this.memory?.index ?? this.repository.adjacency.sqlNeighbors;
  }

  rebuild(): Promise<void> {
    this.loading ??= (async () => {
      const started = performance.now();
      this.pendingDuringLoad = [];
      try {
        const nodes = new NodeStore();
        await this.repository.adjacency.loadNodes(nodes);
        const builder = new IndexBuilder();
        const { hidden, maxNode } = await this.repository.adjacency.loadEdges(builder);
        const memory = { index: builder.freeze(hidden, maxNode), nodes };
        // Changes made while the edges were read are replayed onto the new index, and so are those made
        // while a replay is read: the swap happens only once nothing is left, with no await in between,
        // so no change lands on the old index alone.
        for (let replay = this.pendingDuringLoad.splice(0); replay.length > 0; replay = this.pendingDuringLoad.splice(0)) {
          apply(memory, await this.repository.adjacency.adjacencyOf([...new Set(replay)]));
        }
        this.pendingDuringLoad = undefined;
        this.memory = memory;
        this.loadSeconds = (performance.now() - started) / 1000;
        this.logger.info(
          {
            edges: memory.index.edgeCount,
            memoryBytes: memory.index.memoryBytes,
            nodes: nodes.size,
            nodeMemoryBytes: nodes.memoryBytes,
            ms: Math.round(performance.now() - started),
          },
          'adjacency index loaded',
        );
      } catch (error) {
        this.logger.error({ err: error }, 'adjacency index load failed; answering from SQL');
        this.pendingDuringLoad = undefined;
      } finally {
        this.loading = undefined;
      }
    })();
    return this.loading;
  }

  /**
   * Brings the index up to date for moments whose adjacency changed (here or on another replica).
   * Refreshes run one after another: two overlapping ones could otherwise apply out of order, and the
   * older reading would undo the newer (an edge written by a later ingest vanishing from the index).
   */
  private refresh(ids: readonly number[]): Promise<void> {
    if (ids.length === 0) return Promise.resolve();
    this.pendingDuringLoad?.push(...ids);
    const run = this.refreshes.then(async () => {
      const memory = this.memory;
      if (!memory) return;
      apply(memory, await this.repository.adjacency.adjacencyOf(ids));
      if (memory.index.overlayRatio > this.settings.rebuildRatio && !this.loading) void this.rebuild();
    });
    this.refreshes = run.catch(() => undefined);
    return run;
  }

  // ---- writes ----

  async writeMoments(inputs: readonly MomentInput[]): Promise<{ paths: string[]; created: number }> {
    const { ids, created } = await this.repository.writes.writeMoments(inputs, { maxPerType: this.settings.autoLinkMaxPerType });
    this.statsCache = undefined;
    await this.refresh(ids);
    await this.feed.publish(ids);
    return { paths: inputs.map((input) => input.path), created };
  }

  /** Curated edges from `source`, added without rewriting the moment (MomentWrites.addEdges). */
  async addEdges(source: string, edges: readonly EdgeInput[]): Promise<void> {
    const ids = await this.repository.writes.addEdges(source, edges);
    this.statsCache = undefined;
    await this.refresh(ids);
    await this.feed.publish(ids);
  }

  /**
   * Re-derives the stored moments' figure keys when the matching rules or aliases (domain/figure-names.ts)
   * changed since they were made, before the service answers: an upgraded service finds figures the way it
   * documents. Returns how many moments were rewritten (0 when the keys were current).
   */
  async indexFigures(): Promise<number> {
    if ((await this.repository.meta.get('figure_keys')) === FIGURE_KEYS_VERSION) return 0;
    const rewritten = await this.repository.writes.rewriteFigureKeys(figureKeys);
    await this.repository.meta.set('figure_keys', FIGURE_KEYS_VERSION);
    return rewritten;
  }

  private statsCache: { at: number; value: Promise<GraphStats> } | undefined;

  /** Aggregates over the whole table are cached briefly; a write on this replica clears the cache. */
  stats(maxAgeMs = 10_000): Promise<GraphStats> {
    if (!this.statsCache || performance.now() - this.statsCache.at > maxAgeMs) {
      const value = this.repository.lists.stats().then(
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
    const result = await this.repository.writes.queueRender(input, job, { maxPerType: this.settings.autoLinkMaxPerType });
    if (result.touched.length > 0) {
      this.statsCache = undefined;
      await this.refresh(result.touched);
      await this.feed.publish(result.touched);
    }
    return result;
  }

  // ---- reads ----

  /** Published moments, filtered, sorted and paginated (lists, search, the MCP search tool). */
  list(filters: MomentFilters): Promise<MomentPage<MomentRow & { score?: number }>> {
    return this.repository.lists.list(filters);
  }

  /** One moment by canonical path; unpublished ones (pending, rejected, private) only for trusted callers. */
  moment(path: string, trusted: boolean): Promise<MomentRow | undefined> {
    return this.repository.moments.byPath(path, trusted);
  }

  /** Every edge touching a moment, strongest first. */
  edgesOf(id: number): Promise<EdgeRow[]> {
    return this.repository.moments.edgesOf(id);
  }

  /** The curated edges leaving each moment: what its TDF payload carries. */
  curatedEdgesFrom(ids: readonly number[]): Promise<Map<number, EdgeRow[]>> {
    return this.repository.moments.curatedEdgesFrom(ids);
  }

  today(monthNum: number, day: number, limit: number, offset: number): Promise<MomentPage> {
    return this.repository.lists.today(monthNum, day, limit, offset);
  }

  random(layerMin: number): Promise<MomentRow | undefined> {
    return this.repository.lists.random(layerMin);
  }

  /** The counts under each next segment of a prefix (its segments); below a city, the moments themselves. */
  async browse(prefix: readonly string[]): Promise<BrowseChild[]> {
    if (prefix.length >= SEGMENTS.length) return [];
    const base = prefix.length ? `/${prefix.join('/')}` : '';
    const children = (await this.repository.lists.browse(prefix)).map((child) => ({
      segment: child.segment,
      path: `${base}/${child.segment}`,
      count: child.count,
    }));
    if (prefix.length < SEGMENTS.length - 1) return children;
    const moments = await Promise.all(children.map((child) => this.repository.moments.byPath(child.path, false)));
    return children.map((child, index) => (moments[index] ? { ...child, moment: moments[index] } : child));
  }

  renderJob(id: string): Promise<RenderJobRow | undefined> {
    return this.repository.renderJobs.byId(id);
  }

  // ---- graph queries ----

  /** The anchor's id: from memory once loaded (it holds every published moment), else from SQL. */
  private async anchor(path: string): Promise<number> {
    const id = this.memory ? this.memory.nodes.idOf(path) : (await this.repository.moments.byPath(path, false))?.id;
    if (id === undefined) throw new MomentNotFound(path);
    return id;
  }

  /** Node views of `ids` (with their hop), from memory when it holds them all, else from SQL. */
  private async nodeViews(ids: readonly number[], hopOf: (id: number, position: number) => number): Promise<{ nodes: NodeView[]; paths: Map<number, string> }> {
    const memory = this.memory;
    if (memory && ids.every((id) => memory.nodes.has(id))) {
      const nodes = ids.map((id, position) => memory.nodes.view(id, hopOf(id, position)));
      return { nodes, paths: new Map(ids.map((id, position) => [id, nodes[position]!.id])) };
    }
    const rows = await this.repository.moments.byIds(ids, NODE_COLUMNS);
    const nodes = ids.flatMap((id, position) => {
      const row = rows.get(id);
      return row ? [nodeView(row, hopOf(id, position))] : [];
    });
    return { nodes, paths: new Map([...rows].map(([id, row]) => [id, row.path])) };
  }

  async traverse(path: string, options: { direction: Direction; depth: number; types: EdgeType[]; limit: number; minWeight: number }) {
    const anchor = await this.anchor(path);
    const result = await traverse(this.neighbors, anchor, options);
    const ids = [...result.hops.keys()];
    const [{ nodes, paths }, details] = await Promise.all([
      this.nodeViews(ids, (id) => result.hops.get(id) ?? 0),
      this.repository.moments.edgeDetails(result.edges),
    ]);
    const edges = result.edges.map((edge) => storedEdgeView(edge, paths, details));
    return {
      anchor: paths.get(anchor) ?? path,
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
    const result = await shortestPath(this.neighbors, start, end, options);
    const base = { from, to, max_hops: options.maxHops, edge_types: options.types };
    if (!result.found) return { found: false, ...base, hops: 0, nodes: [], edges: [] };
    const [{ nodes, paths }, details] = await Promise.all([
      this.nodeViews(result.nodes, (_id, position) => position),
      this.repository.moments.edgeDetails(result.edges),
    ]);
    return {
      found: true,
      ...base,
      hops: result.edges.length,
      nodes,
      edges: result.edges.map((edge: StoredEdge) => storedEdgeView(edge, paths, details)),
    };
  }
}
