import type { Knex } from '@tempora/kit/data';
import { type EdgeType, typeCode, typeOf } from '../domain/edge-types.ts';
import type { StoredEdge } from '../domain/graph-search.ts';
import { type EdgeRow, MOMENT_COLUMNS, type MomentRow, normaliseEdge, normaliseMoment, published } from './rows.ts';

const EDGE_SELECT = [
  'e.id',
  'e.source_id',
  'e.target_id',
  's.path as source',
  't.path as target',
  'e.type',
  'e.weight',
  'e.theme',
  'e.description',
  'e.origin',
];

/** Single moments by path or id, and the edges shown with them. */
export class MomentReads {
  private readonly knex: Knex;

  constructor(knex: Knex) {
    this.knex = knex;
  }

  /** A moment by path: published only, or (`trusted`) pending, rejected and private ones too. */
  async byPath(path: string, trusted: boolean): Promise<MomentRow | undefined> {
    const query = this.knex('moments').where({ path });
    if (!trusted) query.andWhereRaw(published());
    const row = (await query.first(MOMENT_COLUMNS)) as MomentRow | undefined;
    return row && normaliseMoment(row);
  }

  /** Moments by id; `columns` narrows the read to what the caller renders (traversal nodes need few). */
  async byIds(ids: readonly number[], columns: readonly string[] = MOMENT_COLUMNS): Promise<Map<number, MomentRow>> {
    if (ids.length === 0) return new Map();
    const rows = (await this.knex('moments')
      .select(columns as string[])
      .whereRaw('id = any(?::bigint[])', [ids as number[]])) as MomentRow[];
    return new Map(rows.map((row) => [Number(row.id), normaliseMoment(row)]));
  }

  /** Which of `paths` are already stored. */
  async existingPaths(paths: readonly string[]): Promise<Set<string>> {
    if (paths.length === 0) return new Set();
    const rows = (await this.knex('moments')
      .whereIn('path', paths as string[])
      .select('path')) as Array<{ path: string }>;
    return new Set(rows.map((row) => row.path));
  }

  /** Every edge touching a moment, both directions, with the paths of both ends; unpublished neighbours left out. */
  async edgesOf(id: number): Promise<EdgeRow[]> {
    const query = this.edges()
      // Only the other end must be published: a trusted caller reading an unpublished moment sees its edges.
      .where((q) =>
        q
          .where('e.source_id', id)
          .andWhereRaw(published('t'))
          .orWhere((o) => o.where('e.target_id', id).andWhereRaw(published('s'))),
      )
      .orderBy([
        { column: 'e.weight', order: 'desc' },
        { column: 'e.id', order: 'asc' },
      ]);
    return ((await query) as EdgeRow[]).map(normaliseEdge);
  }

  /** The curated edges leaving each of `ids` (what a TDF payload carries), in one query. */
  async curatedEdgesFrom(ids: readonly number[]): Promise<Map<number, EdgeRow[]>> {
    const byMoment = new Map<number, EdgeRow[]>(ids.map((id) => [id, []]));
    if (ids.length === 0) return byMoment;
    const rows = (await this.edges()
      .whereRaw('e.source_id = any(?::bigint[])', [ids as number[]])
      .andWhereNot('e.origin', 'auto')
      .andWhereRaw(published('t'))) as EdgeRow[];
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

  /** Edges joined to both ends' moments (aliases s and t), selected as EdgeRow. */
  private edges(): Knex.QueryBuilder {
    return this.knex('edges as e').join('moments as s', 's.id', 'e.source_id').join('moments as t', 't.id', 'e.target_id').select(EDGE_SELECT);
  }
}
