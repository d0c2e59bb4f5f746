import type { Knex } from '@tempora/kit/data';
import { MOMENT_COLUMNS, type MomentRow, normaliseMoment, prefixed, published } from './rows.ts';

export const SORTS = {
  year: [
    ['year', 'asc'],
    ['month_num', 'asc'],
    ['day', 'asc'],
    ['id', 'asc'],
  ],
  '-year': [
    ['year', 'desc'],
    ['month_num', 'desc'],
    ['day', 'desc'],
    ['id', 'desc'],
  ],
  name: [
    ['event_name', 'asc'],
    ['id', 'asc'],
  ],
  '-name': [
    ['event_name', 'desc'],
    ['id', 'desc'],
  ],
  updated: [
    ['updated_at', 'asc'],
    ['id', 'asc'],
  ],
  '-updated': [
    ['updated_at', 'desc'],
    ['id', 'desc'],
  ],
  confidence: [
    ['confidence', 'asc'],
    ['id', 'asc'],
  ],
  '-confidence': [
    ['confidence', 'desc'],
    ['id', 'asc'],
  ],
} as const;
export type SortKey = keyof typeof SORTS | 'relevance';

export interface MomentFilters {
  q?: string | undefined;
  yearFrom?: number | undefined;
  yearTo?: number | undefined;
  /** The words of a figure's name (figure-names.ts queryWords); all must be words of one name of one figure. */
  entity?: string[] | undefined;
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

export interface MomentPage<T = MomentRow> {
  items: T[];
  total: number;
}

/** Published moments in pages: filtered lists and search, today in history, a random pick, browsing and stats. */
export class MomentLists {
  private readonly knex: Knex;

  constructor(knex: Knex) {
    this.knex = knex;
  }

  async list(filters: MomentFilters): Promise<MomentPage<MomentRow & { score?: number }>> {
    const base = this.filtered(filters);
    const query = base.clone().select(prefixed('m'));
    if (filters.sort === 'relevance' && filters.q) {
      query
        .select(this.knex.raw(`ts_rank(m.search, websearch_to_tsquery('english', ?)) + similarity(m.event_name, ?) as score`, [filters.q, filters.q]))
        .orderBy([
          { column: 'score', order: 'desc' },
          { column: 'm.id', order: 'asc' },
        ]);
    } else {
      const sort = filters.sort === 'relevance' ? 'year' : filters.sort;
      query.orderBy(SORTS[sort].map(([column, order]): { column: string; order: 'asc' | 'desc' } => ({ column: `m.${column}`, order })));
    }
    const total = await count(base);
    const rows = (await query.limit(filters.limit).offset(filters.offset)) as Array<MomentRow & { score?: number }>;
    return {
      items: rows.map((row) => ({ ...normaliseMoment(row), ...(row.score !== undefined ? { score: Number(row.score) } : {}) })),
      total,
    };
  }

  /** Moments of every year on a calendar day, oldest first. */
  async today(monthNum: number, day: number, limit: number, offset: number): Promise<MomentPage> {
    const base = this.knex('moments').whereRaw(published()).andWhere({ month_num: monthNum, day });
    const total = await count(base);
    const rows = (await base
      .clone()
      .select(MOMENT_COLUMNS)
      .orderBy([{ column: 'year' }, { column: 'time' }, { column: 'id' }])
      .limit(limit)
      .offset(offset)) as MomentRow[];
    return { items: rows.map(normaliseMoment), total };
  }

  /** A uniformly chosen id range probe: O(log n) where `order by random()` would sort the whole table. */
  async random(layerMin: number): Promise<MomentRow | undefined> {
    const qualifying = () => this.knex('moments').whereRaw(published()).andWhere('layer', '>=', layerMin);
    const bounds = (await qualifying().first(this.knex.raw('min(id) as lo, max(id) as hi'))) as { lo: string | null; hi: string | null };
    if (bounds.lo === null || bounds.hi === null) return undefined;
    const pick = Number(bounds.lo) + Math.floor(Math.random() * (Number(bounds.hi) - Number(bounds.lo) + 1));
    const row = (await qualifying().andWhere('id', '>=', pick).orderBy('id').first(MOMENT_COLUMNS)) as MomentRow | undefined;
    return row && normaliseMoment(row);
  }

  /** Next-segment counts under a path prefix of `depth` segments. */
  async browse(prefix: readonly string[]): Promise<Array<{ segment: string; count: number; year: number }>> {
    const depth = prefix.length;
    const query = this.knex('moments').whereRaw(published());
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
      .whereRaw(published())
      .select(
        knex.raw('count(*) as total_nodes'),
        knex.raw('min(year) as min_year'),
        knex.raw('max(year) as max_year'),
        knex.raw('avg(confidence) as avg_confidence'),
        knex.raw('max(updated_at) as last_updated'),
        knex.raw(`count(*) filter (where image_url is not null) as nodes_with_images`),
      )) as Array<Record<string, string | null | Date>>;
    const layers = (await knex('moments').whereRaw(published()).select('layer').count({ count: '*' }).groupBy('layer')) as Array<{
      layer: number;
      count: string;
    }>;
    const sources = (await knex('moments').whereRaw(published()).select('source_type').count({ count: '*' }).groupBy('source_type')) as Array<{
      source_type: string;
      count: string;
    }>;
    const edgeTypes = (await knex('edges as e')
      .join('moments as s', 's.id', 'e.source_id')
      .join('moments as t', 't.id', 'e.target_id')
      .whereRaw(published('s'))
      .andWhereRaw(published('t'))
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

  private filtered(filters: Omit<MomentFilters, 'sort' | 'limit' | 'offset'>): Knex.QueryBuilder {
    const query = this.knex('moments as m').whereRaw(published('m'));
    const text = filters.q;
    if (text) {
      query.andWhere((q) =>
        q
          .whereRaw(`m.search @@ websearch_to_tsquery('english', ?)`, [text])
          .orWhereRaw('m.event_name % ?', [text])
          .orWhereRaw('m.event_name ilike ?', [`%${escapeLike(text)}%`]),
      );
    }
    if (filters.yearFrom !== undefined) query.andWhere('m.year', '>=', filters.yearFrom);
    if (filters.yearTo !== undefined) query.andWhere('m.year', '<=', filters.yearTo);
    if (filters.entity?.length) {
      // The GIN index on entity_keys finds the moments holding every word; for two words or more, the
      // recheck keeps those where one name holds them all (not one word from each of two figures).
      query.andWhereRaw('m.entity_keys @> ?::text[]', [filters.entity]);
      if (filters.entity.length > 1)
        query.andWhereRaw(`exists (select 1 from unnest(m.entity_names) as name where string_to_array(name, ' ') @> ?::text[])`, [filters.entity]);
    }
    if (filters.country) query.andWhere('m.country', filters.country);
    if (filters.region) query.andWhere('m.region', filters.region);
    if (filters.city) query.andWhere('m.city', filters.city);
    if (filters.tags?.length) query.andWhereRaw('m.tags @> ?::text[]', [filters.tags]);
    if (filters.type) query.andWhere('m.type', filters.type);
    if (filters.layerMin !== undefined) query.andWhere('m.layer', '>=', filters.layerMin);
    return query;
  }
}

async function count(query: Knex.QueryBuilder): Promise<number> {
  const [row] = (await query.clone().count<{ count: string }[]>({ count: '*' })) as [{ count: string }];
  return Number(row.count);
}

function escapeLike(value: string): string {
  return value.replace(/[\\%_]/g, (c) => `\\${c}`);
}
