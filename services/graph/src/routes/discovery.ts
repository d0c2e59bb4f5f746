import { defineRoute, listEnvelope, notFound, type RouteDefinition, unprocessable } from '@tempora/kit/http';
import { daysInMonth, MONTHS, PathError, parsePrefix, SEGMENTS } from '@tempora/kit/moments';
import { z } from 'zod';
import { MOMENT_TYPES } from '../domain/moment.ts';
import { BrowseSchema, MomentListSchema, MomentSchema, SearchResultSchema, TdfRecordSchema } from '../schemas.ts';
import { momentView } from '../views.ts';
import type { GraphRouteDeps } from './context.ts';
import { LIST_PARAMETERS, listFilters, renderMoments } from './moments.ts';
import { boundedInt, cappedInt, format, graphAliases, offset, place, queryObject, tagList, yearRange } from './params.ts';

const SERVICE = ['ServiceKey'];

const SearchQuery = queryObject({
  ...LIST_PARAMETERS,
  country: place.optional(),
  region: place.optional(),
  city: place.optional(),
  tags: tagList.optional(),
  type: z.enum(MOMENT_TYPES).optional(),
  layer_min: boundedInt(0, 2).optional(),
}).superRefine(yearRange);

const monthParam = z
  .string()
  .transform((value, ctx) => {
    const number = /^\d{1,2}$/.test(value) ? Number(value) : MONTHS.indexOf(value.toLowerCase() as (typeof MONTHS)[number]) + 1;
    if (number < 1 || number > 12) {
      ctx.addIssue({ code: 'custom', message: 'month is a month name (july) or number (7)' });
      return z.NEVER;
    }
    return number;
  })
  .meta({ description: 'month name or number; default today (UTC)' });

const TodayQuery = queryObject({
  month: monthParam.optional(),
  day: boundedInt(1, 31).optional().meta({ description: 'day of month; default today (UTC)' }),
  limit: cappedInt(20, 100),
  offset,
  format,
}).superRefine((value, ctx) => {
  if ((value.month === undefined) !== (value.day === undefined)) {
    ctx.addIssue({ code: 'custom', path: [value.month === undefined ? 'month' : 'day'], message: 'give month and day together' });
  } else if (value.month !== undefined && value.day !== undefined && value.day > daysInMonth(2000, value.month)) {
    ctx.addIssue({ code: 'custom', path: ['day'], message: `${MONTHS[value.month - 1]} has no day ${value.day}` });
  }
});

/** The discovery routes: browsing the path tree, ranked search, a random moment and today in history. */
export function discoveryRoutes(deps: GraphRouteDeps): RouteDefinition[] {
  return [browseRoute(deps), searchRoute(deps), randomRoute(deps), todayRoute(deps)];
}

function browseRoute({ graph }: GraphRouteDeps): RouteDefinition {
  return defineRoute({
    method: 'get',
    path: '/browse',
    aliases: graphAliases('/browse'),
    operationId: 'browse',
    summary: 'Browse the path tree',
    description:
      'Counts of public moments under each next segment of a path prefix (years, then months, days, times, countries, regions, cities, moments). At the city level each child is a moment, returned with full metadata.',
    tags: ['service'],
    security: SERVICE,
    query: queryObject({ prefix: z.string().max(400).default('').meta({ description: 'path prefix such as /1969/july; empty for the years' }) }),
    responses: { 200: { description: 'Next-segment counts', schema: BrowseSchema } },
    handler: async (_ctx, { query }) => {
      let parts: string[];
      try {
        parts = parsePrefix(query.prefix);
      } catch (error) {
        if (error instanceof PathError) throw unprocessable(error.message, [{ path: `query.prefix.${error.segment}`, message: error.message }]);
        throw error;
      }
      const children = await graph.browse(parts);
      return {
        prefix: parts.length ? `/${parts.join('/')}` : '/',
        depth: parts.length,
        segment: SEGMENTS[parts.length] ?? null,
        children: children.map(({ moment, ...child }) => (moment ? { ...child, moment: momentView(moment) } : child)),
        total: children.reduce((sum, child) => sum + child.count, 0),
      };
    },
  });
}

function searchRoute(deps: GraphRouteDeps): RouteDefinition {
  return defineRoute({
    method: 'get',
    path: '/search',
    aliases: graphAliases('/search'),
    operationId: 'search',
    summary: 'Ranked search with advanced filters',
    description:
      'Full-text and fuzzy name search ranked by relevance (ts_rank plus trigram similarity), with filters on years, figure, place, tags, type and layer.',
    tags: ['service'],
    security: SERVICE,
    query: SearchQuery,
    responses: {
      200: {
        description: 'Ranked moments (score present when q is given)',
        schema: z.union([SearchResultSchema, listEnvelope(TdfRecordSchema, 'TdfSearchResult')]),
      },
    },
    handler: async (_ctx, { query }) => {
      const page = await deps.graph.list({
        ...listFilters(query),
        country: query.country,
        region: query.region,
        city: query.city,
        tags: query.tags,
        type: query.type,
        layerMin: query.layer_min,
      });
      const items =
        query.format === 'tdf' ? await renderMoments(deps, page.items, 'tdf') : page.items.map((row) => ({ ...momentView(row), score: row.score ?? 0 }));
      return { items, total: page.total, limit: query.limit, offset: query.offset };
    },
  });
}

function randomRoute(deps: GraphRouteDeps): RouteDefinition {
  return defineRoute({
    method: 'get',
    path: '/random',
    aliases: graphAliases('/random'),
    operationId: 'randomMoment',
    summary: 'A random moment with metadata (layer 1 or above)',
    tags: ['service'],
    security: SERVICE,
    query: queryObject({ layer_min: boundedInt(1, 2).default(1), format }),
    responses: {
      200: { description: 'One moment', schema: z.union([MomentSchema, TdfRecordSchema]) },
      404: { description: 'The graph has no such moment yet' },
    },
    handler: async (_ctx, { query }) => {
      const row = await deps.graph.random(query.layer_min);
      if (!row) throw notFound(`no public moment at layer ${query.layer_min} or above`);
      const [rendered] = await renderMoments(deps, [row], query.format);
      return rendered;
    },
  });
}

function todayRoute(deps: GraphRouteDeps): RouteDefinition {
  return defineRoute({
    method: 'get',
    path: '/today',
    aliases: graphAliases('/today'),
    operationId: 'today',
    summary: 'Today in history',
    description: 'Moments of every year on a calendar day, oldest first; today (UTC) unless month and day are given.',
    tags: ['service'],
    security: SERVICE,
    query: TodayQuery,
    responses: {
      200: {
        description: 'Moments on that day',
        schema: z.union([MomentListSchema.extend({ month: z.string(), day: z.number().int() }), listEnvelope(TdfRecordSchema, 'TdfToday')]),
      },
    },
    handler: async (_ctx, { query }) => {
      const now = new Date();
      const month = query.month ?? now.getUTCMonth() + 1;
      const day = query.day ?? now.getUTCDate();
      const page = await deps.graph.today(month, day, query.limit, query.offset);
      return {
        month: MONTHS[month - 1],
        day,
        items: await renderMoments(deps, page.items, query.format),
        total: page.total,
        limit: query.limit,
        offset: query.offset,
      };
    },
  });
}
