import type { Knex } from '@tempora/kit/data';
import type { IndexBuilder, IndexedEdge } from '../domain/adjacency-index.ts';
import { EDGE_TYPES, type EdgeType, IN, OUT, typeCode } from '../domain/edge-types.ts';
import type { NeighborSource, Step } from '../domain/graph-search.ts';
import type { NodeFields, NodeStore } from '../domain/node-store.ts';
import { published } from './rows.ts';

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

/** The float32 just below `value`'s own float32: every weight whose float32 reaches that of `value` is above it. */
function below32(value: number): number {
  const single = new Float32Array([value]);
  if (!(single[0]! > 0)) return -1;
  new Int32Array(single.buffer)[0]! -= 1;
  return single[0]!;
}

/** What the in-memory graph is built and refreshed from, and the SQL neighbour expansion used until it is. */
export class AdjacencyReads {
  private readonly knex: Knex;

  constructor(knex: Knex) {
    this.knex = knex;
  }

  /**
   * Streams every edge into `builder` in id order, a page at a time, as arrays of plain numbers: the type
   * is turned into its code by PostgreSQL and ids cast to int4, so no row object or string is made per edge.
   */
  async loadEdges(builder: IndexBuilder, pageSize = 200_000): Promise<{ hidden: number[]; maxNode: number }> {
    const hidden = ((await this.knex('moments').whereRaw(`not ${published()}`).select('id')) as Array<{ id: string }>).map((row) => Number(row.id));
    const [{ max }] = (await this.knex('moments').max({ max: 'id' })) as [{ max: string | null }];
    const typeArray = `array[${EDGE_TYPES.map((type) => `'${type}'`).join(',')}]::text[]`;
    let after = 0;
    for (;;) {
      const { rows } = (await this.knex
        .raw(
          `select id::int8::float8, source_id::int4, target_id::int4, array_position(${typeArray}, type) - 1, weight, (theme <> '' or description <> '') from edges where id > ? order by id limit ?`,
          [after, pageSize],
        )
        .options({ rowMode: 'array' })) as { rows: Array<[number, number, number, number, number, boolean]> };
      for (const [, source, target, type, weight, detailed] of rows) builder.add({ source, target, type, weight, detailed });
      if (rows.length < pageSize) break;
      after = rows[rows.length - 1]![0];
    }
    return { hidden, maxNode: Number(max ?? 0) };
  }

  /** Streams every published moment's node fields into `store`, a page at a time. */
  async loadNodes(store: NodeStore, pageSize = 100_000): Promise<void> {
    let after = 0;
    for (;;) {
      const { rows } = (await this.knex
        .raw(`select ${NODE_FIELDS} from moments where ${published()} and id > ? order by id limit ?`, [after, pageSize])
        .options({ rowMode: 'array' })) as { rows: NodeRow[] };
      for (const row of rows) store.set(nodeFields(row));
      if (rows.length < pageSize) break;
      after = rows[rows.length - 1]![0];
    }
  }

  /** Whether each of `ids` is published, its node fields and every edge, to refresh the in-memory graph after a write. */
  async adjacencyOf(ids: readonly number[]): Promise<AdjacencyChange> {
    if (ids.length === 0) return { moments: [], edges: [] };
    const { rows: nodes } = (await this.knex
      .raw(`select ${NODE_FIELDS}, ${published()} from moments where id = any(?::bigint[])`, [ids as number[]])
      .options({ rowMode: 'array' })) as { rows: Array<[...NodeRow, boolean]> };
    const moments = nodes.map((row) => ({ id: row[0], hidden: !row[9], node: nodeFields(row as unknown as NodeRow) }));
    const present = new Set(moments.map((moment) => moment.id));
    const missing = ids.filter((id) => !present.has(id)).map((id) => ({ id, hidden: true }));
    const rows = (await this.knex('edges')
      .whereIn('source_id', ids as number[])
      .orWhereIn('target_id', ids as number[])
      .select('id', 'source_id', 'target_id', 'type', 'weight', this.knex.raw(`(theme <> '' or description <> '') as detailed`))) as Array<{
      id: string;
      source_id: string;
      target_id: string;
      type: EdgeType;
      weight: number;
      detailed: boolean;
    }>;
    return {
      moments: [...moments, ...missing],
      edges: rows.map((row) => ({
        id: Number(row.id),
        source: Number(row.source_id),
        target: Number(row.target_id),
        type: typeCode(row.type),
        weight: Number(row.weight),
        detailed: row.detailed,
      })),
    };
  }

  /**
   * The same neighbour expansion as the in-memory index, answered by SQL (used while the index loads).
   * Weights are compared in single precision, as the index holds them, so a bound within float32
   * resolution of a weight gets the same answer from both: SQL selects from just below the bound's float32
   * (a cast to real in SQL would fail on weights and bounds under its range) and the exact test is below.
   */
  readonly sqlNeighbors: NeighborSource = {
    expand: async (frontier, plan, minWeight, within) => {
      const outTypes = EDGE_TYPES.filter((_, code) => (plan[code]! & OUT) !== 0);
      const inTypes = EDGE_TYPES.filter((_, code) => (plan[code]! & IN) !== 0);
      const nodes = [...frontier];
      const { rows } = (await this.knex.raw(
        `select e.source_id as "from", e.target_id as "to", e.type, e.weight, true as outgoing
           from edges e join moments m on m.id = e.target_id
          where e.source_id = any(?::bigint[]) and e.type = any(?::text[]) and e.weight >= ? and ${published('m')}
         union all
         select e.target_id as "from", e.source_id as "to", e.type, e.weight, false as outgoing
           from edges e join moments m on m.id = e.source_id
          where e.target_id = any(?::bigint[]) and e.type = any(?::text[]) and e.weight >= ? and ${published('m')}`,
        [nodes, outTypes, below32(minWeight), nodes, inTypes, below32(minWeight)],
      )) as { rows: Array<{ from: string; to: string; type: EdgeType; weight: number; outgoing: boolean }> };
      const bound = Math.fround(minWeight);
      const steps = rows
        .map(
          (row): Step => ({
            from: Number(row.from),
            to: Number(row.to),
            type: typeCode(row.type),
            weight: Math.fround(Number(row.weight)),
            outgoing: row.outgoing,
            detailed: true,
          }),
        )
        .filter((step) => step.weight >= bound);
      return within ? steps.filter((step) => within.has(step.to)) : steps;
    },
  };
}

/** Moments whose adjacency changed (hidden when unpublished or gone) and every edge touching them. */
export interface AdjacencyChange {
  moments: Array<{ id: number; hidden: boolean; node?: NodeFields }>;
  edges: IndexedEdge[];
}
