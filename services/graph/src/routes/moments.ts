import { defineRoute, listEnvelope, notFound, type RouteDefinition } from '@tempora/kit/http';
import { z } from 'zod';
import { momentPath } from '../domain/moment.ts';
import { type MomentFilters, type MomentRow, SORTS, type SortKey } from '../repository/index.ts';
import { MomentDetailSchema, MomentListSchema, StatsSchema, TdfRecordSchema } from '../schemas.ts';
import { momentDetailView, momentTdf, momentView } from '../views.ts';
import { type GraphRouteDeps, isTrusted } from './context.ts';
import { cappedInt, entity, format, graphAliases, offset, queryObject, text, year, yearRange } from './params.ts';

export const SORT_VALUES = ['relevance', ...Object.keys(SORTS)] as [string, ...string[]];

/** The parameters of the list; `/search` takes them and more. */
export const LIST_PARAMETERS = {
  limit: cappedInt(20, 100),
  offset,
  q: text.optional().meta({ description: 'full-text search over name, description, figures and tags (web-search syntax), with typo-tolerant name matching' }),
  year_from: year.optional(),
  year_to: year.optional(),
  entity: entity.optional(),
  sort: z
    .enum(SORT_VALUES)
    .optional()
    .meta({ description: 'relevance (default with q), year (default without q), -year, name, -name, updated, -updated, confidence, -confidence' }),
  format,
};

const ListQuery = queryObject(LIST_PARAMETERS).superRefine(yearRange);

/** The repository filters a list query asks for; `/search` adds its own on top. */
export function listFilters(query: z.output<typeof ListQuery>): MomentFilters {
  return {
    q: query.q,
    yearFrom: query.year_from,
    yearTo: query.year_to,
    entity: query.entity,
    sort: (query.sort ?? (query.q ? 'relevance' : 'year')) as SortKey,
    limit: query.limit,
    offset: query.offset,
  };
}

/** Renders rows as moments or, with `format=tdf`, as TDF records (their curated edges read in one query). */
export async function renderMoments(deps: GraphRouteDeps, rows: MomentRow[], as: 'json' | 'tdf') {
  if (as === 'json') return rows.map(momentView);
  const edges = await deps.graph.curatedEdgesFrom(rows.map((row) => row.id));
  return rows.map((row) => momentTdf(row, edges.get(row.id) ?? [], deps.version));
}

export function momentRoutes(deps: GraphRouteDeps): RouteDefinition[] {
  const graph = deps.graph;
  return [
    defineRoute({
      method: 'get',
      path: '/api/v1/stats',
      aliases: graphAliases('/api/v1/stats'),
      operationId: 'getStats',
      security: [],
      summary: 'Graph statistics',
      tags: ['public'],
      responses: { 200: { description: 'Counts over public moments and their edges', schema: StatsSchema } },
      handler: () => graph.stats(),
    }),
    defineRoute({
      method: 'get',
      path: '/api/v1/moments',
      aliases: graphAliases('/api/v1/moments'),
      operationId: 'listMoments',
      security: [],
      summary: 'List moments',
      description: 'Public moments, filtered and paginated. `format=tdf` returns TDF records in the same envelope.',
      tags: ['public'],
      query: ListQuery,
      responses: { 200: { description: 'A page of moments', schema: z.union([MomentListSchema, listEnvelope(TdfRecordSchema, 'TdfList')]) } },
      handler: async (_ctx, { query }) => {
        const page = await graph.list(listFilters(query));
        return { items: await renderMoments(deps, page.items, query.format), total: page.total, limit: query.limit, offset: query.offset };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/api/v1/moments/{path}',
      wildcard: 'path',
      aliases: graphAliases('/api/v1/moments/{path}'),
      operationId: 'getMoment',
      security: [],
      summary: 'One moment with its edges',
      description: 'The path is the canonical path without its leading slash. Private moments are visible only to service-key and writer callers.',
      tags: ['public'],
      params: z.object({ path: momentPath }),
      query: queryObject({ format }),
      responses: {
        200: { description: 'The moment and every edge touching it (stored direction)', schema: z.union([MomentDetailSchema, TdfRecordSchema]) },
        404: { description: 'No such moment' },
      },
      handler: async (ctx, { params, query }) => {
        const row = await graph.moment(params.path, isTrusted(ctx));
        if (!row) throw notFound(`no moment at ${params.path}`);
        if (query.format === 'tdf') return (await renderMoments(deps, [row], 'tdf'))[0];
        return momentDetailView(row, await graph.edgesOf(row.id));
      },
    }),
  ];
}
