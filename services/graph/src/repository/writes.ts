import { randomUUID } from 'node:crypto';
import type { Knex } from '@tempora/kit/data';
import { adjacentYears, type EdgeInput, type MomentInput, momentColumns, storedOrder } from '../domain/moment.ts';
import { type MomentRow, published, type RenderJobRow } from './rows.ts';

export interface AutoLinkSettings {
  maxPerType: number;
}

export class MissingTargetError extends Error {
  readonly index: number;
  readonly target: string;
  constructor(index: number, target: string) {
    super(`edge target ${target} does not exist`);
    this.index = index;
    this.target = target;
  }
}

type AutoLinkType = 'contemporaneous' | 'same_location' | 'thematic';
const AUTO_DEGREE: Record<AutoLinkType, string> = {
  contemporaneous: 'auto_contemporaneous',
  same_location: 'auto_same_location',
  thematic: 'auto_thematic',
};

interface CuratedEdgeRow {
  source_id: number;
  target_id: number;
  type: string;
  weight: number;
  theme: string;
  description: string;
  origin: string;
}

/**
 * Writes curated edges, upserted by (source, target, type). An automatic link in the place of one is
 * removed first (with its ends' automatic degrees): merged into it, the curated edge would keep the
 * automatic origin, leave the TDF export and be deleted with the next re-derivation of its moments' links.
 */
async function upsertCurated(trx: Knex, rows: readonly CuratedEdgeRow[]): Promise<void> {
  if (rows.length === 0) return;
  const automatic = rows.filter((row) => row.type in AUTO_DEGREE).map((row) => [row.source_id, row.target_id, row.type]);
  if (automatic.length > 0) {
    const replaced = (await trx('edges')
      .where({ origin: 'auto' })
      .whereIn(['source_id', 'target_id', 'type'], automatic)
      .del()
      .returning(['source_id', 'target_id', 'type'])) as Array<{ source_id: string; target_id: string; type: AutoLinkType }>;
    for (const edge of replaced) await trx('moments').whereIn('id', [edge.source_id, edge.target_id]).decrement(AUTO_DEGREE[edge.type], 1);
  }
  await trx('edges').insert(rows).onConflict(['source_id', 'target_id', 'type']).merge(['weight', 'theme', 'description']);
}

const searchDocument = (trx: Knex, parts: [name: string, description: string, figures: string, tags: string]) =>
  trx.raw(`to_tsvector('english', ? || ' ' || ? || ' ' || ? || ' ' || ?)`, parts);

/** The writes of moments: upserts with their curated edges, render requests, and the automatic links both re-derive. */
export class MomentWrites {
  private readonly knex: Knex;

  constructor(knex: Knex) {
    this.knex = knex;
  }

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
        const search = searchDocument(trx, [columns.event_name, columns.description, columns.figures.join(' '), columns.tags.join(' ')]);
        const [row] = (await trx('moments')
          .insert({ ...columns, search })
          .onConflict('path')
          .merge({ ...columns, search, updated_at: trx.fn.now() })
          .returning(['id', trx.raw('(xmax = 0) as inserted')])) as Array<{ id: string | number; inserted: boolean }>;
        written.push({ id: Number(row!.id), inserted: row!.inserted });
        idByPath.set(columns.path, Number(row!.id));
      }
      const touched = new Set(written.map((moment) => moment.id));
      for (const [index, input] of inputs.entries()) {
        const sourceId = written[index]!.id;
        // Keyed as stored: one INSERT .. ON CONFLICT cannot touch a row twice, so a record naming the same
        // edge twice (or both ways, for a symmetric type) keeps its last mention.
        const rows = new Map<string, CuratedEdgeRow>();
        for (const edge of input.edges) {
          const targetId = idByPath.get(edge.target) ?? (await idOf(trx, edge.target));
          if (targetId === undefined) throw new MissingTargetError(index, edge.target);
          if (targetId === sourceId) continue;
          const [source, target] = storedOrder(sourceId, targetId, edge.type);
          rows.set(`${source}:${target}:${edge.type}`, {
            source_id: source,
            target_id: target,
            type: edge.type,
            weight: edge.weight,
            theme: edge.theme,
            description: edge.description,
            origin: input.source_type === 'seed' ? 'seed' : 'ingest',
          });
          touched.add(targetId);
        }
        await upsertCurated(trx, [...rows.values()]);
      }
      for (const moment of written) {
        for (const neighbor of await relink(trx, moment.id, moment.inserted, autoLink.maxPerType)) touched.add(neighbor);
      }
      return { ids: [...touched], created: written.filter((moment) => moment.inserted).length };
    });
  }

  /**
   * Adds curated edges from the moment at `source` to stored moments, upserted by (source, target, type),
   * without writing the moment itself: a worker that links a moment it read earlier must not write back
   * fields another worker changed since (the renderer's layer 2). Returns the ids whose adjacency changed.
   */
  async addEdges(source: string, edges: readonly EdgeInput[]): Promise<number[]> {
    const paths = [source, ...edges.map((edge) => edge.target)];
    const rows = (await this.knex('moments').whereIn('path', paths).select('id', 'path')) as Array<{ id: string; path: string }>;
    const ids = new Map(rows.map((row) => [row.path, Number(row.id)]));
    const sourceId = ids.get(source);
    if (sourceId === undefined) throw new MissingTargetError(0, source);
    const byKey = new Map<
      string,
      { source_id: number; target_id: number; type: EdgeInput['type']; weight: number; theme: string; description: string; origin: string }
    >();
    for (const edge of edges) {
      const targetId = ids.get(edge.target);
      if (targetId === undefined) throw new MissingTargetError(0, edge.target);
      const [from, to] = storedOrder(sourceId, targetId, edge.type);
      // The last mention of an edge wins, as in writeMoments.
      byKey.set(`${from}:${to}:${edge.type}`, {
        source_id: from,
        target_id: to,
        type: edge.type,
        weight: edge.weight,
        theme: edge.theme,
        description: edge.description,
        origin: 'ingest',
      });
    }
    const inserts = [...byKey.values()];
    if (inserts.length > 0) {
      await this.knex.transaction(async (trx) => {
        // It may change automatic degrees, which the transactions re-deriving links serialise on.
        await lockAutoLinks(trx);
        await upsertCurated(trx, inserts);
      });
    }
    return [...new Set([sourceId, ...inserts.map((edge) => (edge.source_id === sourceId ? edge.target_id : edge.source_id))])];
  }

  /**
   * Records the moment at layer 0 when it is new (auto-linked like any insert) and a durable render job
   * for it, in one transaction. Returns the ids whose adjacency changed.
   */
  async queueRender(
    input: MomentInput,
    job: { requestedBy: string; request: Record<string, unknown> },
    autoLink: AutoLinkSettings,
  ): Promise<{ job: RenderJobRow; created: boolean; layer: number; touched: number[] }> {
    return this.knex.transaction(async (trx) => {
      await lockAutoLinks(trx);
      const columns = momentColumns(input);
      const inserted = (await trx('moments')
        .insert({ ...columns, search: searchDocument(trx, [columns.event_name, '', '', '']) })
        .onConflict('path')
        .ignore()
        .returning('id')) as Array<{ id: string }>;
      const moment = (await trx('moments').where({ path: input.path }).first('id', 'layer')) as { id: string; layer: number };
      const momentId = Number(moment.id);
      const touched = inserted.length > 0 ? [momentId, ...(await relink(trx, momentId, true, autoLink.maxPerType))] : [];
      const [row] = (await trx('render_jobs')
        .insert({ id: randomUUID(), moment_id: momentId, requested_by: job.requestedBy, request: JSON.stringify(job.request) })
        .returning('*')) as RenderJobRow[];
      return { job: { ...row!, moment_id: momentId, path: input.path }, created: inserted.length > 0, layer: Number(moment.layer), touched };
    });
  }

  /**
   * Re-derives `entity_keys` and `entity_names` of every moment with figures through `keysOf`, a page at
   * a time, leaving `updated_at` alone: the moments did not change, only how they are found. Returns how
   * many moments were rewritten.
   */
  async rewriteFigureKeys(keysOf: (figures: readonly string[]) => { entity_keys: string[]; entity_names: string[] }, pageSize = 2000): Promise<number> {
    let after = 0;
    let rewritten = 0;
    for (;;) {
      const rows = (await this.knex('moments')
        .where('id', '>', after)
        .andWhereRaw(`figures <> '{}'`)
        .orderBy('id')
        .limit(pageSize)
        .select('id', 'figures')) as Array<{ id: string; figures: string[] }>;
      if (rows.length === 0) break;
      const keys = rows.map((row) => ({ id: Number(row.id), ...keysOf(row.figures) }));
      await this.knex.raw(
        `update moments m set entity_keys = k.entity_keys, entity_names = k.entity_names
           from jsonb_to_recordset(?::jsonb) as k(id bigint, entity_keys text[], entity_names text[]) where m.id = k.id`,
        [JSON.stringify(keys)],
      );
      rewritten += rows.length;
      after = Number(rows[rows.length - 1]!.id);
      if (rows.length < pageSize) break;
    }
    return rewritten;
  }
}

async function idOf(trx: Knex, path: string): Promise<number | undefined> {
  const row = await trx('moments').where({ path }).first('id');
  return row ? Number(row.id) : undefined;
}

/**
 * Serialises the transactions that re-derive automatic links: each one updates the degree counters of
 * neighbours anywhere in the graph, so two concurrent writers (API replicas, workers) would otherwise
 * deadlock on each other's rows. Held until the transaction ends.
 */
async function lockAutoLinks(trx: Knex.Transaction): Promise<void> {
  await trx.raw('select pg_advisory_xact_lock(hashtext(?))', ['tempora_graph_autolink']);
}

/**
 * Replaces a moment's automatic links: contemporaneous (year ±1, 0.5), same_location (same country,
 * region and city, 0.5) and thematic (shared tags, 0.3). Each type is bounded at `max` automatic edges
 * per moment on both ends, most relevant first, so the edge count grows linearly with the moments.
 * Each moment keeps its automatic degree per type in a column, so the bound costs no count per candidate.
 * Returns the neighbours whose adjacency changed.
 */
async function relink(trx: Knex.Transaction, id: number, isNew: boolean, max: number): Promise<number[]> {
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
  const moment = (await trx('moments').where({ id }).first()) as (MomentRow & Record<string, unknown>) | undefined;
  // Unpublished moments are not linked: their links would take the places of published neighbours' visible ones.
  if (moment?.visibility !== 'public' || moment.status === 'pending' || max <= 0) return [...neighbors];

  const [before, after] = adjacentYears(moment.year);
  const rules: Array<{ type: AutoLinkType; weight: number; where: Knex.Raw; order: Knex.Raw }> = [
    {
      type: 'contemporaneous',
      weight: 0.5,
      where: trx.raw('m.year between ? and ?', [before, after]),
      order: trx.raw(
        '(m.country = ?) desc, cardinality(array(select unnest(m.tags) intersect select unnest(?::text[]))) desc, abs(m.year - ?), m.confidence desc, m.id',
        [moment.country, moment.tags, moment.year],
      ),
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
    const room = max - Number(moment[degree] ?? 0);
    if (room <= 0) continue;
    const { rows } = (await trx.raw(
      `insert into edges (source_id, target_id, type, weight, origin)
       select least(?::bigint, c.id), greatest(?::bigint, c.id), ?, ?, 'auto' from (
         select m.id from moments m
         where ${rule.where.toQuery()} and m.id <> ? and ${published('m')} and m.${degree} < ?
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
