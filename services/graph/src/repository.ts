import { randomUUID } from 'node:crypto';
import type { Knex } from '@tempora/kit/data';
import { EDGE_TYPES, IN, OUT, typeCode, typeOf, type EdgeType } from './domain/edge-types.ts';
import type { NeighborSource, Step, StoredEdge } from './domain/graph-search.ts';
import type { IndexBuilder, IndexedEdge } from './domain/adjacency-index.ts';
import type { NodeFields, NodeStore } from './domain/node-store.ts';
import { adjacentYears, momentColumns, storedOrder, type MomentInput } from './domain/moment.ts';

export interface MomentRow {
  id: number;
  path: string;
  event_name: string;
  description: string;
  year: number;
  month_num: number;
  day: number;
  time: string;
  country: string;
  region: string;
  city: string;
  slug: string;
  era: string;
  type: string;
  layer: number;
  status: string;
  visibility: string;
  figures: string[];
  tags: string[];
  latitude: number | null;
  longitude: number | null;
  confidence: number;
  image_url: string | null;
  source_type: string;
  created_at: Date;
  updated_at: Date;
}

export interface EdgeRow {
  id: number;
  source: string;
  target: string;
  source_id: number;
  target_id: number;
  type: EdgeType;
  weight: number;
  theme: string;
  description: string;
  origin: string;
}

export interface RenderJobRow {
  id: string;
  moment_id: number;
  path: string;
  status: string;
  requested_by: string;
  request: Record<string, unknown>;
  attempts: number;
  error: string | null;
  scene_id: string | null;
  created_at: Date;
  updated_at: Date;
}

/** A render job a renderer has claimed, with what it needs to know of its moment. */
export interface ClaimedRenderJob extends RenderJobRow {
  moment_status: string;
}

export const SORTS = {
  year: [['year', 'asc'], ['month_num', 'asc'], ['day', 'asc'], ['id', 'asc']],
  '-year': [['year', 'desc'], ['month_num', 'desc'], ['day', 'desc'], ['id', 'desc']],
  name: [['event_name', 'asc'], ['id', 'asc']],
  '-name': [['event_name', 'desc'], ['id', 'desc']],
  updated: [['updated_at', 'asc'], ['id', 'asc']],
  '-updated': [['updated_at', 'desc'], ['id', 'desc']],
  confidence: [['confidence', 'asc'], ['id', 'asc']],
  '-confidence': [['confidence', 'desc'], ['id', 'asc']],
} as const;
export type SortKey = keyof typeof SORTS | 'relevance';

export interface MomentFilters {
  q?: string | undefined;
  yearFrom?: number | undefined;
  yearTo?: number | undefined;
  entity?: string | undefined;
  country?: string | undefined;
  region?: string | undefined;
  city?: string | undefined;
  tags?: string[] | undefined;
  type?: string | undefined;
  layerMin?: number | undefined;
  sort: SortKey;
  limit: number;
  offset: number;
}

const normaliseMoment = (row: MomentRow): MomentRow => ({ ...row, id: Number(row.id), confidence: Number(row.confidence) });
const normaliseEdge = (row: EdgeRow): EdgeRow => ({ ...row, id: Number(row.id), source_id: Number(row.source_id), target_id: Number(row.target_id), weight: Number(row.weight) });

const SEARCH_DOCUMENT = `to_tsvector('english', ? || ' ' || ? || ' ' || ? || ' ' || ?)`;

/** What a moment row is read as: everything but the search document and the bookkeeping columns. */
const MOMENT_COLUMNS = [
  'id', 'path', 'event_name', 'description', 'year', 'month_num', 'day', 'time', 'country', 'region', 'city', 'slug', 'era', 'type',
  'layer', 'status', 'visibility', 'figures', 'tags', 'latitude', 'longitude', 'confidence', 'image_url', 'source_type', 'created_at', 'updated_at',
];
/** The columns a traversal or path node shows. */
export const NODE_COLUMNS = [
  'id', 'path', 'event_name', 'year', 'month_num', 'day', 'era', 'type', 'layer', 'country', 'region', 'city', 'latitude', 'longitude', 'confidence', 'status',
];
const prefixed = (alias: string) => MOMENT_COLUMNS.map((column) => `${alias}.${column}`);

type AutoLinkType = 'contemporaneous' | 'same_location' | 'thematic';
const AUTO_DEGREE: Record<AutoLinkType, string> = {
  contemporaneous: 'auto_contemporaneous',
  same_location: 'auto_same_location',
  thematic: 'auto_thematic',
};

export interface AutoLinkSettings {
  maxPerType: number;
}

/** Every SQL statement of the graph service. Nothing else in the service talks to PostgreSQL. */
export class GraphRepository {
  readonly knex: Knex;

  constructor(knex: Knex) {
    this.knex = knex;
  }

  // ---- writes ----

  /**
   * Upserts moments by path and their curated edges, then re-derives their automatic links, all in one
   * transaction. Returns the ids whose adjacency changed (the moments and their neighbours).
   */
  async writeMoments(inputs: readonly MomentInput[], autoLink: AutoLinkSettings): Promise<{ ids: number[]; created: number }> {
    return this.knex.transaction(async (trx) => {
      await lockAutoLinks(trx);
      const written: Array<{ id: number; inserted: boolean }> = [];
      const idByPath = new Map<string, number>();
      for (const input of inputs) {
        const columns = momentColumns(input);
        const searchText = [columns.event_name, columns.description, columns.figures.join(' '), columns.tags.join(' ')];
        const [row] = (await trx('moments')
          .insert({ ...columns, search: trx.raw(SEARCH_DOCUMENT, searchText) })
          .onConflict('path')
          .merge({ ...columns, search: trx.raw(SEARCH_DOCUMENT, searchText), updated_at: trx.fn.now() })
          .returning(['id', trx.raw('(xmax = 0) as inserted')])) as Array<{ id: string | number; inserted: boolean }>;
        written.push({ id: Number(row!.id), inserted: row!.inserted });
        idByPath.set(columns.path, Number(row!.id));
      }
      const touched = new Set(written.map((moment) => moment.id));
      for (const [index, input] of inputs.entries()) {
        const sourceId = written[index]!.id;
        const rows = [];
        for (const edge of input.edges) {
          const targetId = idByPath.get(edge.target) ?? (await this.idOf(edge.target, trx));
          if (targetId === undefined) throw new MissingTargetError(index, edge.target);
          if (targetId === sourceId) continue;
          const [source, target] = storedOrder(sourceId, targetId, edge.type);
          rows.push({ source_id: source, target_id: target, type: edge.type, weight: edge.weight, theme: edge.theme, description: edge.description, origin: input.source_type === 'seed' ? 'seed' : 'ingest' });
          touched.add(targetId);
        }
        if (rows.length > 0) await trx('edges').insert(rows).onConflict(['source_id', 'target_id', 'type']).merge(['weight', 'theme', 'description']);
      }
      for (const moment of written) {
        for (const neighbor of await this.relink(trx, moment.id, moment.inserted, autoLink.maxPerType)) touched.add(neighbor);
      }
      return { ids: [...touched], created: written.filter((moment) => moment.inserted).length };
    });
  }

  async idOf(path: string, trx: Knex = this.knex): Promise<number | undefined> {
    const row = await trx('moments').where({ path }).first('id');
    return row ? Number(row.id) : undefined;
  }

  /**
   * Replaces a moment's automatic links: contemporaneous (year ±1, 0.5), same_location (same country,
   * region and city, 0.5) and thematic (shared tags, 0.3). Each type is bounded at `max` automatic edges
   * per moment on both ends, most relevant first, so the edge count grows linearly with the moments.
   * Each moment keeps its automatic degree per type in a column, so the bound costs no count per candidate.
   * Returns the neighbours whose adjacency changed.
   */
  private async relink(trx: Knex.Transaction, id: number, isNew: boolean, max: number): Promise<number[]> {
    const neighbors = new Set<number>();
    if (!isNew) {
      const removed = (await trx('edges')
        .where({ origin: 'auto' })
        .andWhere((q) => q.where('source_id', id).orWhere('target_id', id))
        .del()
        .returning(['source_id', 'target_id', 'type'])) as Array<{ source_id: string; target_id: string; type: AutoLinkType }>;
      for (const edge of removed) {
        const other = Number(edge.source_id) === id ? Number(edge.target_id) : Number(edge.source_id);
        neighbors.add(other);
        await trx('moments').where({ id: other }).decrement(AUTO_DEGREE[edge.type], 1);
      }
      await trx('moments').where({ id }).update({ auto_contemporaneous: 0, auto_same_location: 0, auto_thematic: 0 });
    }
    const moment = (await trx('moments').where({ id }).first()) as MomentRow | undefined;
    if (!moment || moment.visibility !== 'public' || max <= 0) return [...neighbors];

    const [before, after] = adjacentYears(moment.year);
    const rules: Array<{ type: AutoLinkType; weight: number; where: Knex.Raw; order: Knex.Raw }> = [
      {
        type: 'contemporaneous',
        weight: 0.5,
        where: trx.raw('m.year between ? and ?', [before, after]),
        order: trx.raw('(m.country = ?) desc, cardinality(array(select unnest(m.tags) intersect select unnest(?::text[]))) desc, abs(m.year - ?), m.confidence desc, m.id', [moment.country, moment.tags, moment.year]),
      },
      {
        type: 'same_location',
        weight: 0.5,
        where: trx.raw('m.country = ? and m.region = ? and m.city = ?', [moment.country, moment.region, moment.city]),
        order: trx.raw('abs(m.year - ?), m.id', [moment.year]),
      },
      {
        type: 'thematic',
        weight: 0.3,
        where: trx.raw('m.tags && ?::text[]', [moment.tags]),
        order: trx.raw('cardinality(array(select unnest(m.tags) intersect select unnest(?::text[]))) desc, abs(m.year - ?), m.id', [moment.tags, moment.year]),
      },
    ];
    for (const rule of rules) {
      if (rule.type === 'thematic' && moment.tags.length === 0) continue;
      const degree = AUTO_DEGREE[rule.type];
      const room = max - Number((moment as unknown as Record<string, number>)[degree] ?? 0);
      if (room <= 0) continue;
      const { rows } = (await trx.raw(
        `insert into edges (source_id, target_id, type, weight, origin)
         select least(?::bigint, c.id), greatest(?::bigint, c.id), ?, ?, 'auto' from (
           select m.id from moments m
           where ${rule.where.toQuery()} and m.id <> ? and m.visibility = 'public' and m.${degree} < ?
           order by ${rule.order.toQuery()}
           limit ?
         ) c
         on conflict (source_id, target_id, type) do nothing
         returning case when source_id = ? then target_id else source_id end as other`,
        [id, id, rule.type, rule.weight, id, max, room, id],
      )) as { rows: Array<{ other: string }> };
      if (rows.length === 0) continue;
      const others = rows.map((row) => Number(row.other));
      await trx('moments').whereIn('id', others).increment(degree, 1);
      await trx('moments').where({ id }).increment(degree, others.length);
      for (const other of others) neighbors.add(other);
    }
    neighbors.delete(id);
    return [...neighbors];
  }

  // ---- single moments ----

  async momentByPath(path: string, includePrivate: boolean): Promise<MomentRow | undefined> {
    const query = this.knex('moments').where({ path });
    if (!includePrivate) query.andWhere({ visibility: 'public' });
    const row = (await query.first(MOMENT_COLUMNS)) as MomentRow | undefined;
    return row && normaliseMoment(row);
  }

  /** Moments by id; `columns` narrows the read to what the caller renders (traversal nodes need few). */
  async momentsByIds(ids: readonly number[], columns: readonly string[] = MOMENT_COLUMNS): Promise<Map<number, MomentRow>> {
    if (ids.length === 0) return new Map();
    const rows = (await this.knex('moments').select(columns as string[]).whereRaw('id = any(?::bigint[])', [ids as number[]])) as MomentRow[];
    return new Map(rows.map((row) => [Number(row.id), normaliseMoment(row)]));
  }

  /** Every edge touching a moment, both directions, with the paths of both ends; private neighbours left out. */
  async edgesOf(id: number): Promise<EdgeRow[]> {
    const query = this.knex('edges as e')
      .join('moments as s', 's.id', 'e.source_id')
      .join('moments as t', 't.id', 'e.target_id')
      // Only the other end must be public: a trusted caller reading a private moment sees its edges.
      .where((q) => q.where({ 'e.source_id': id, 't.visibility': 'public' }).orWhere({ 'e.target_id': id, 's.visibility': 'public' }))
      .select('e.id', 'e.source_id', 'e.target_id', 's.path as source', 't.path as target', 'e.type', 'e.weight', 'e.theme', 'e.description', 'e.origin')
      .orderBy([{ column: 'e.weight', order: 'desc' }, { column: 'e.id', order: 'asc' }]);
    return ((await query) as EdgeRow[]).map(normaliseEdge);
  }

  /** The curated edges leaving each of `ids` (what a TDF payload carries), in one query. */
  async curatedEdgesFrom(ids: readonly number[]): Promise<Map<number, EdgeRow[]>> {
    const byMoment = new Map<number, EdgeRow[]>(ids.map((id) => [id, []]));
    if (ids.length === 0) return byMoment;
    const rows = (await this.knex('edges as e')
      .join('moments as s', 's.id', 'e.source_id')
      .join('moments as t', 't.id', 'e.target_id')
      .whereRaw('e.source_id = any(?::bigint[])', [ids as number[]])
      .andWhereNot('e.origin', 'auto')
      .andWhere('t.visibility', 'public')
      .select('e.id', 'e.source_id', 'e.target_id', 's.path as source', 't.path as target', 'e.type', 'e.weight', 'e.theme', 'e.description', 'e.origin')) as EdgeRow[];
    for (const row of rows.map(normaliseEdge)) byMoment.get(row.source_id)?.push(row);
    return byMoment;
  }

  /** Theme and description of edges met by a traversal, keyed `source:target:type`. */
  async edgeDetails(all: readonly StoredEdge[]): Promise<Map<string, { theme: string; description: string }>> {
    const edges = all.filter((edge) => edge.detailed !== false);
    if (edges.length === 0) return new Map();
    const { rows } = (await this.knex.raw(
      `select e.source_id, e.target_id, e.type, e.theme, e.description from edges e
       join unnest(?::bigint[], ?::bigint[], ?::text[]) as k(s, t, ty) on e.source_id = k.s and e.target_id = k.t and e.type = k.ty`,
      [edges.map((e) => e.source), edges.map((e) => e.target), edges.map((e) => typeOf(e.type))],
    )) as { rows: Array<{ source_id: string; target_id: string; type: EdgeType; theme: string; description: string }> };
    return new Map(rows.map((row) => [`${row.source_id}:${row.target_id}:${typeCode(row.type)}`, { theme: row.theme, description: row.description }]));
  }

  // ---- lists ----

  private filtered(filters: Omit<MomentFilters, 'sort' | 'limit' | 'offset'>): Knex.QueryBuilder {
    const query = this.knex('moments as m').where('m.visibility', 'public');
    const text = filters.q;
    if (text) {
      query.andWhere((q) =>
        q.whereRaw(`m.search @@ websearch_to_tsquery('english', ?)`, [text]).orWhereRaw('m.event_name % ?', [text]).orWhereRaw('m.event_name ilike ?', [`%${escapeLike(text)}%`]),
      );
    }
    if (filters.yearFrom !== undefined) query.andWhere('m.year', '>=', filters.yearFrom);
    if (filters.yearTo !== undefined) query.andWhere('m.year', '<=', filters.yearTo);
    if (filters.entity) query.andWhereRaw('m.entity_keys @> ?::text[]', [[filters.entity.toLowerCase()]]);
    if (filters.country) query.andWhere('m.country', filters.country);
    if (filters.region) query.andWhere('m.region', filters.region);
    if (filters.city) query.andWhere('m.city', filters.city);
    if (filters.tags?.length) query.andWhereRaw('m.tags @> ?::text[]', [filters.tags]);
    if (filters.type) query.andWhere('m.type', filters.type);
    if (filters.layerMin !== undefined) query.andWhere('m.layer', '>=', filters.layerMin);
    return query;
  }

  async listMoments(filters: MomentFilters): Promise<{ items: Array<MomentRow & { score?: number }>; total: number }> {
    const base = this.filtered(filters);
    const [{ count }] = (await base.clone().count<{ count: string }[]>({ count: '*' })) as [{ count: string }];
    const query = base.clone().select(prefixed('m'));
    if (filters.sort === 'relevance' && filters.q) {
      query
        .select(this.knex.raw(`ts_rank(m.search, websearch_to_tsquery('english', ?)) + similarity(m.event_name, ?) as score`, [filters.q, filters.q]))
        .orderBy([{ column: 'score', order: 'desc' }, { column: 'm.id', order: 'asc' }]);
    } else {
      const sort = filters.sort === 'relevance' ? 'year' : filters.sort;
      query.orderBy(SORTS[sort].map(([column, order]): { column: string; order: 'asc' | 'desc' } => ({ column: `m.${column}`, order })));
    }
    const rows = (await query.limit(filters.limit).offset(filters.offset)) as Array<MomentRow & { score?: number }>;
    return {
      items: rows.map((row) => ({ ...normaliseMoment(row), ...(row.score !== undefined ? { score: Number(row.score) } : {}) })),
      total: Number(count),
    };
  }

  async today(monthNum: number, day: number, limit: number, offset: number): Promise<{ items: MomentRow[]; total: number }> {
    const base = this.knex('moments').where({ visibility: 'public', month_num: monthNum, day });
    const [{ count }] = (await base.clone().count<{ count: string }[]>({ count: '*' })) as [{ count: string }];
    const rows = (await base.clone().select(MOMENT_COLUMNS).orderBy([{ column: 'year' }, { column: 'time' }, { column: 'id' }]).limit(limit).offset(offset)) as MomentRow[];
    return { items: rows.map(normaliseMoment), total: Number(count) };
  }

  /** A uniformly chosen id range probe: O(log n) where `order by random()` would sort the whole table. */
  async random(layerMin: number): Promise<MomentRow | undefined> {
    const bounds = (await this.knex('moments').where({ visibility: 'public' }).andWhere('layer', '>=', layerMin).first(this.knex.raw('min(id) as lo, max(id) as hi'))) as { lo: string | null; hi: string | null };
    if (bounds.lo === null || bounds.hi === null) return undefined;
    const pick = Number(bounds.lo) + Math.floor(Math.random() * (Number(bounds.hi) - Number(bounds.lo) + 1));
    const row = (await this.knex('moments').where({ visibility: 'public' }).andWhere('layer', '>=', layerMin).andWhere('id', '>=', pick).orderBy('id').first(MOMENT_COLUMNS)) as MomentRow | undefined;
    return row && normaliseMoment(row);
  }

  /** Next-segment counts under a path prefix of `depth` segments. */
  async browse(prefix: readonly string[]): Promise<Array<{ segment: string; count: number; year: number }>> {
    const depth = prefix.length;
    const query = this.knex('moments').where({ visibility: 'public' });
    prefix.forEach((segment, index) => query.andWhereRaw(`split_part(path, '/', ?) = ?`, [index + 2, segment]));
    const rows = (await query
      .select(this.knex.raw(`split_part(path, '/', ?) as segment`, [depth + 2]))
      .min({ year: 'year' })
      .min({ month: 'month_num' })
      .count({ count: '*' })
      .groupByRaw('1')) as Array<{ segment: string; count: string; year: number; month: number }>;
    const numeric = depth === 0 || depth === 2 || depth === 3;
    const ordered = rows.sort((a, b) =>
      depth === 1 ? a.month - b.month : numeric ? Number(a.segment) - Number(b.segment) : a.segment.localeCompare(b.segment),
    );
    return ordered.map((row) => ({ segment: row.segment, count: Number(row.count), year: Number(row.year) }));
  }

  async stats() {
    const knex = this.knex;
    const [totals] = (await knex('moments')
      .where({ visibility: 'public' })
      .select(
        knex.raw('count(*) as total_nodes'),
        knex.raw('min(year) as min_year'),
        knex.raw('max(year) as max_year'),
        knex.raw('avg(confidence) as avg_confidence'),
        knex.raw('max(updated_at) as last_updated'),
        knex.raw(`count(*) filter (where image_url is not null) as nodes_with_images`),
      )) as Array<Record<string, string | null | Date>>;
    const layers = (await knex('moments').where({ visibility: 'public' }).select('layer').count({ count: '*' }).groupBy('layer')) as Array<{ layer: number; count: string }>;
    const sources = (await knex('moments').where({ visibility: 'public' }).select('source_type').count({ count: '*' }).groupBy('source_type')) as Array<{ source_type: string; count: string }>;
    const edgeTypes = (await knex('edges as e')
      .join('moments as s', 's.id', 'e.source_id')
      .join('moments as t', 't.id', 'e.target_id')
      .where({ 's.visibility': 'public', 't.visibility': 'public' })
      .select('e.type')
      .count({ count: '*' })
      .groupBy('e.type')) as Array<{ type: string; count: string }>;
    return {
      totals: totals!,
      layers: layers.map((row) => ({ layer: Number(row.layer), count: Number(row.count) })),
      sources: sources.map((row) => ({ source: row.source_type, count: Number(row.count) })),
      edgeTypes: edgeTypes.map((row) => ({ type: row.type, count: Number(row.count) })),
    };
  }

  // ---- adjacency ----

  /**
   * Streams every edge into `builder` in id order, a page at a time, as arrays of plain numbers: the type
   * is turned into its code by PostgreSQL and ids cast to int4, so no row object or string is made per edge.
   */
  async loadEdges(builder: IndexBuilder, pageSize = 200_000): Promise<{ hidden: number[]; maxNode: number }> {
    const hidden = ((await this.knex('moments').where({ visibility: 'private' }).select('id')) as Array<{ id: string }>).map((row) => Number(row.id));
    const [{ max }] = (await this.knex('moments').max({ max: 'id' })) as [{ max: string | null }];
    const typeArray = `array[${EDGE_TYPES.map((type) => `'${type}'`).join(',')}]::text[]`;
    let after = 0;
    for (;;) {
      const { rows } = (await this.knex
        .raw(`select id::int8::float8, source_id::int4, target_id::int4, array_position(${typeArray}, type) - 1, weight, (theme <> '' or description <> '') from edges where id > ? order by id limit ?`, [after, pageSize])
        .options({ rowMode: 'array' })) as { rows: Array<[number, number, number, number, number, boolean]> };
      for (const [, source, target, type, weight, detailed] of rows) builder.add({ source, target, type, weight, detailed });
      if (rows.length < pageSize) break;
      after = rows[rows.length - 1]![0];
    }
    return { hidden, maxNode: Number(max ?? 0) };
  }

  /** Streams every public moment's node fields into `store`, a page at a time. */
  async loadNodes(store: NodeStore, pageSize = 100_000): Promise<void> {
    let after = 0;
    for (;;) {
      const { rows } = (await this.knex
        .raw(`select ${NODE_FIELDS} from moments where visibility = 'public' and id > ? order by id limit ?`, [after, pageSize])
        .options({ rowMode: 'array' })) as { rows: NodeRow[] };
      for (const row of rows) store.set(nodeFields(row));
      if (rows.length < pageSize) break;
      after = rows[rows.length - 1]![0];
    }
  }

  /** Current visibility, node fields and every edge of `ids`, to refresh the in-memory graph after a write. */
  async adjacencyOf(ids: readonly number[]): Promise<{ moments: Array<{ id: number; hidden: boolean; node?: NodeFields }>; edges: IndexedEdge[] }> {
    if (ids.length === 0) return { moments: [], edges: [] };
    const { rows: nodes } = (await this.knex
      .raw(`select ${NODE_FIELDS}, visibility from moments where id = any(?::bigint[])`, [ids as number[]])
      .options({ rowMode: 'array' })) as { rows: Array<[...NodeRow, string]> };
    const moments = nodes.map((row) => ({ id: row[0], hidden: row[9] !== 'public', node: nodeFields(row as unknown as NodeRow) }));
    const present = new Set(moments.map((moment) => moment.id));
    const missing = ids.filter((id) => !present.has(id)).map((id) => ({ id, hidden: true }));
    const rows = (await this.knex('edges')
      .whereIn('source_id', ids as number[])
      .orWhereIn('target_id', ids as number[])
      .select('id', 'source_id', 'target_id', 'type', 'weight', this.knex.raw(`(theme <> '' or description <> '') as detailed`))) as Array<{ id: string; source_id: string; target_id: string; type: EdgeType; weight: number; detailed: boolean }>;
    return {
      moments: [...moments, ...missing],
      edges: rows.map((row) => ({ id: Number(row.id), source: Number(row.source_id), target: Number(row.target_id), type: typeCode(row.type), weight: Number(row.weight), detailed: row.detailed })),
    };
  }

  /** The same neighbour expansion as the in-memory index, answered by SQL (used while the index loads). */
  readonly sqlNeighbors: NeighborSource = {
    expand: async (frontier, plan, minWeight, within) => {
      const outTypes = EDGE_TYPES.filter((_, code) => (plan[code]! & OUT) !== 0);
      const inTypes = EDGE_TYPES.filter((_, code) => (plan[code]! & IN) !== 0);
      const nodes = [...frontier];
      const { rows } = (await this.knex.raw(
        `select e.source_id as "from", e.target_id as "to", e.type, e.weight, true as outgoing
           from edges e join moments m on m.id = e.target_id
          where e.source_id = any(?::bigint[]) and e.type = any(?::text[]) and e.weight >= ? and m.visibility = 'public'
         union all
         select e.target_id as "from", e.source_id as "to", e.type, e.weight, false as outgoing
           from edges e join moments m on m.id = e.source_id
          where e.target_id = any(?::bigint[]) and e.type = any(?::text[]) and e.weight >= ? and m.visibility = 'public'`,
        [nodes, outTypes, minWeight, nodes, inTypes, minWeight],
      )) as { rows: Array<{ from: string; to: string; type: EdgeType; weight: number; outgoing: boolean }> };
      const steps = rows.map((row): Step => ({ from: Number(row.from), to: Number(row.to), type: typeCode(row.type), weight: Math.fround(Number(row.weight)), outgoing: row.outgoing, detailed: true }));
      return within ? steps.filter((step) => within.has(step.to)) : steps;
    },
  };

  async meta(key: string): Promise<string | undefined> {
    const row = (await this.knex('graph_meta').where({ key }).first('value')) as { value: string } | undefined;
    return row?.value;
  }

  async setMeta(key: string, value: string): Promise<void> {
    await this.knex('graph_meta').insert({ key, value }).onConflict('key').merge();
  }

  // ---- render jobs ----

  /**
   * Records the moment at layer 0 when it is new (auto-linked like any insert) and a durable render job
   * for it, in one transaction. Returns the ids whose adjacency changed.
   */
  async queueRender(input: MomentInput, job: { requestedBy: string; request: Record<string, unknown> }, autoLink: AutoLinkSettings): Promise<{ job: RenderJobRow; created: boolean; layer: number; touched: number[] }> {
    return this.knex.transaction(async (trx) => {
      await lockAutoLinks(trx);
      const columns = momentColumns(input);
      const inserted = (await trx('moments')
        .insert({ ...columns, search: trx.raw(SEARCH_DOCUMENT, [columns.event_name, '', '', '']) })
        .onConflict('path')
        .ignore()
        .returning('id')) as Array<{ id: string }>;
      const moment = (await trx('moments').where({ path: input.path }).first('id', 'layer')) as { id: string; layer: number };
      const momentId = Number(moment.id);
      const touched = inserted.length > 0 ? [momentId, ...(await this.relink(trx, momentId, true, autoLink.maxPerType))] : [];
      const [row] = (await trx('render_jobs')
        .insert({ id: randomUUID(), moment_id: momentId, requested_by: job.requestedBy, request: JSON.stringify(job.request) })
        .returning('*')) as RenderJobRow[];
      return { job: { ...row!, moment_id: momentId, path: input.path }, created: inserted.length > 0, layer: Number(moment.layer), touched };
    });
  }

  async renderJob(id: string): Promise<RenderJobRow | undefined> {
    const row = (await this.knex('render_jobs as j').join('moments as m', 'm.id', 'j.moment_id').where('j.id', id).first('j.*', 'm.path')) as RenderJobRow | undefined;
    return row && { ...row, moment_id: Number(row.moment_id) };
  }

  /**
   * Marks up to `limit` due queued jobs running for `worker`, oldest first, counting the attempt. SKIP
   * LOCKED lets replicas claim at the same time without waiting on, or taking, each other's rows.
   */
  async claimRenderJobs(worker: string, limit: number): Promise<ClaimedRenderJob[]> {
    const { rows } = (await this.knex.raw(
      `with claimed as (
         update render_jobs set status = 'running', attempts = attempts + 1, claimed_by = ?, claimed_at = now(), updated_at = now()
          where id in (select id from render_jobs where status = 'queued' and run_after <= now() order by created_at limit ? for update skip locked)
         returning *)
       select c.*, m.path, m.status as moment_status from claimed c join moments m on m.id = c.moment_id order by c.created_at`,
      [worker, limit],
    )) as { rows: ClaimedRenderJob[] };
    return rows.map((row) => ({ ...row, moment_id: Number(row.moment_id) }));
  }

  /** Records the scene on the job and its moment; false when `worker` no longer holds the job (it was reclaimed). */
  async completeRenderJob(id: string, worker: string, sceneId: string): Promise<boolean> {
    return this.knex.transaction(async (trx) => {
      const [row] = (await trx('render_jobs')
        .where({ id, status: 'running', claimed_by: worker })
        .update({ status: 'succeeded', scene_id: sceneId, error: null, claimed_by: null, claimed_at: null, updated_at: trx.fn.now() })
        .returning('moment_id')) as Array<{ moment_id: string }>;
      if (!row) return false;
      await trx('moments').where({ id: row.moment_id }).update({ scene_id: sceneId });
      return true;
    });
  }

  /**
   * A failed attempt: queued again after `backoffMs × 2^(attempts-1)` while attempts remain, else failed
   * for good with the error. Returns the job's new status (undefined when `worker` no longer holds it).
   */
  async failRenderAttempt(id: string, worker: string, error: string, maxAttempts: number, backoffMs: number): Promise<'queued' | 'failed' | undefined> {
    const { rows } = (await this.knex.raw(
      `update render_jobs set status = case when attempts >= ? then 'failed' else 'queued' end,
              run_after = now() + (? * power(2, greatest(attempts - 1, 0))) * interval '1 millisecond',
              error = ?, claimed_by = null, claimed_at = null, updated_at = now()
        where id = ? and status = 'running' and claimed_by = ?
       returning status`,
      [maxAttempts, backoffMs, error.slice(0, 2000), id, worker],
    )) as { rows: Array<{ status: 'queued' | 'failed' }> };
    return rows[0]?.status;
  }

  /** Gives a job back undone (shutdown, spent budget): queued from `runAfter`, and the attempt does not count. */
  async releaseRenderJob(id: string, worker: string, runAfter: Date): Promise<void> {
    await this.knex('render_jobs')
      .where({ id, status: 'running', claimed_by: worker })
      .update({ status: 'queued', attempts: this.knex.raw('greatest(attempts - 1, 0)'), run_after: runAfter, claimed_by: null, claimed_at: null, updated_at: this.knex.fn.now() });
  }

  /**
   * Jobs left running longer than `staleMs` lost their worker (it crashed or was killed): queued again,
   * or failed when that was their last attempt.
   */
  async reclaimStaleRenderJobs(staleMs: number, maxAttempts: number): Promise<Array<{ id: string; status: string }>> {
    const { rows } = (await this.knex.raw(
      `update render_jobs set status = case when attempts >= ? then 'failed' else 'queued' end, run_after = now(),
              error = 'the worker running it stopped before finishing', claimed_by = null, claimed_at = null, updated_at = now()
        where status = 'running' and claimed_at < now() - ? * interval '1 millisecond'
       returning id, status`,
      [maxAttempts, staleMs],
    )) as { rows: Array<{ id: string; status: string }> };
    return rows;
  }

  /**
   * Adds `usd` to what `role` spent on `day` unless the total would pass `limitUsd`, in one statement, so
   * replicas sharing a budget cannot overshoot it together. False when refused.
   */
  async chargeSpend(role: string, day: string, usd: number, limitUsd: number): Promise<boolean> {
    if (usd > limitUsd) return false;
    const { rows } = (await this.knex.raw(
      `insert into worker_spend (day, role, spent_usd) values (?, ?, ?)
       on conflict (day, role) do update set spent_usd = worker_spend.spent_usd + excluded.spent_usd
        where worker_spend.spent_usd + excluded.spent_usd <= ?
       returning spent_usd`,
      [day, role, usd, limitUsd],
    )) as { rows: unknown[] };
    return rows.length > 0;
  }

  /** Corrects a charge made on an estimate once the real cost is known. */
  async adjustSpend(role: string, day: string, deltaUsd: number): Promise<void> {
    await this.knex('worker_spend').where({ role, day }).update({ spent_usd: this.knex.raw('greatest(0, spent_usd + ?)', [deltaUsd]) });
  }

  async spentUsd(role: string, day: string): Promise<number> {
    const row = (await this.knex('worker_spend').where({ role, day }).first('spent_usd')) as { spent_usd: string } | undefined;
    return Number(row?.spent_usd ?? 0);
  }

  /** Moments awaiting moderation, longest waiting first. */
  /** Pending moments no judge holds, oldest first. */
  async pendingMoments(limit: number): Promise<MomentRow[]> {
    const rows = (await this.unclaimed('judge')
      .where({ 'm.status': 'pending' })
      .orderBy([{ column: 'm.updated_at' }, { column: 'm.id' }])
      .limit(limit)
      .select(prefixed('m'))) as MomentRow[];
    return rows.map(normaliseMoment);
  }

  /** Public, active moments never expanded, that no expander holds, with fewer than `maxCurated` curated edges. */
  async underConnectedMoments(limit: number, maxCurated: number): Promise<MomentRow[]> {
    const rows = (await this.unclaimed('expander')
      .where({ 'm.visibility': 'public', 'm.status': 'active' })
      .whereNull('m.expanded_at')
      .andWhereRaw(`(select count(*) from edges e where (e.source_id = m.id or e.target_id = m.id) and e.origin <> 'auto') < ?`, [maxCurated])
      .orderBy('m.id')
      .limit(limit)
      .select(prefixed('m'))) as MomentRow[];
    return rows.map(normaliseMoment);
  }

  private unclaimed(role: string): Knex.QueryBuilder {
    return this.knex('moments as m').whereNotExists(
      this.knex('worker_claims as c').whereRaw('c.moment_id = m.id').andWhere('c.role', role).andWhereRaw('c.until > now()').select(this.knex.raw('1')),
    );
  }

  /**
   * Claims `ids` for `role` for `seconds`, those no other replica of the role holds: returns the ids
   * claimed. Two replicas claiming one moment at once: the second waits for the first's insert and gets none.
   * A claim is kept after the work succeeds, until it lapses: by then the moment is no longer a candidate,
   * so a replica that chose it from an older read cannot take it again.
   */
  async claimMoments(role: string, ids: readonly number[], seconds: number): Promise<Set<number>> {
    if (ids.length === 0) return new Set();
    // Lapsed claims on other moments are cleared by the same statement, so the table holds live claims only.
    const { rows } = (await this.knex.raw(
      `with lapsed as (delete from worker_claims where role = ? and until <= now() and moment_id <> all(?::bigint[]))
       insert into worker_claims (role, moment_id, until) select ?, id, now() + make_interval(secs => ?) from unnest(?::bigint[]) as id
       on conflict (role, moment_id) do update set until = excluded.until where worker_claims.until <= now()
       returning moment_id`,
      [role, ids as number[], role, seconds, ids as number[]],
    )) as { rows: Array<{ moment_id: string }> };
    return new Set(rows.map((row) => Number(row.moment_id)));
  }

  /** Gives up claims whose work failed, so that any replica may try again at once. */
  async releaseMoments(role: string, ids: readonly number[]): Promise<void> {
    if (ids.length > 0) await this.knex('worker_claims').where({ role }).whereIn('moment_id', ids as number[]).delete();
  }

  async markExpanded(ids: readonly number[]): Promise<void> {
    if (ids.length > 0) await this.knex('moments').whereIn('id', ids as number[]).update({ expanded_at: this.knex.fn.now() });
  }

  /** Which of `paths` are already stored. */
  async existingPaths(paths: readonly string[]): Promise<Set<string>> {
    if (paths.length === 0) return new Set();
    const rows = (await this.knex('moments').whereIn('path', paths as string[]).select('path')) as Array<{ path: string }>;
    return new Set(rows.map((row) => row.path));
  }
}

/** The columns of a node, as an array row: id, path, name, type, layer, status, latitude, longitude, confidence. */
const NODE_FIELDS = 'id::int4, path, event_name, type, layer, status, latitude, longitude, confidence';
type NodeRow = [number, string, string, string, number, string, number | null, number | null, number];
const nodeFields = ([id, path, name, type, layer, status, latitude, longitude, confidence]: NodeRow): NodeFields => ({
  id,
  path,
  name,
  type,
  layer,
  status,
  latitude,
  longitude,
  confidence: Number(confidence),
});

export class MissingTargetError extends Error {
  readonly index: number;
  readonly target: string;
  constructor(index: number, target: string) {
    super(`edge target ${target} does not exist`);
    this.index = index;
    this.target = target;
  }
}

/**
 * Serialises the transactions that re-derive automatic links: each one updates the degree counters of
 * neighbours anywhere in the graph, so two concurrent writers (API replicas, workers) would otherwise
 * deadlock on each other's rows. Held until the transaction ends.
 */
async function lockAutoLinks(trx: Knex.Transaction): Promise<void> {
  await trx.raw('select pg_advisory_xact_lock(hashtext(?))', ['tempora_graph_autolink']);
}

function escapeLike(value: string): string {
  return value.replace(/[\\%_]/g, (c) => `\\${c}`);
}
