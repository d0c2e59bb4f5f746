import { z } from 'zod';
import { type EdgeType, parseEdgeTypes } from '../domain/edge-types.ts';
import { queryWords } from '../domain/figure-names.ts';
import { SLUG, tag } from '../domain/moment.ts';

/**
 * Query parameters shared by the graph routes (and the MCP tools' arguments). Values above a documented
 * cap are clamped to the cap (the response says which value was used); values outside a rule's range, and
 * parameters a route does not take, are refused with 422: a filter is never silently left out.
 */

/**
 * The parameters of a route, refusing any other one by name: a misspelt filter (`tag` for `tags`) or one
 * only another route takes (`country` on the plain list) would otherwise be dropped and answered unfiltered.
 */
export function queryObject<S extends z.ZodRawShape>(shape: S) {
  const known = Object.keys(shape);
  return z.looseObject(shape).superRefine((value, ctx) => {
    for (const key of Object.keys(value)) {
      if (!known.includes(key)) ctx.addIssue({ code: 'custom', path: [key], message: `not a parameter of this operation, which takes ${known.join(', ')}` });
    }
  });
}

/**
 * A number given as a query string (or, from MCP, as a JSON number). `z.coerce` would read a blank value
 * as 0 (`year_from=` as "from year 0"); here a blank value is refused like any other non-number.
 */
const numeric = <T extends z.ZodType>(schema: T) => z.preprocess((value) => (typeof value === 'string' && value.trim() !== '' ? Number(value) : value), schema);
const number = () => z.number({ error: 'must be a number' });

export const cappedInt = (fallback: number, cap: number, min = 1) =>
  numeric(number().int().min(min).default(fallback))
    .transform((value) => Math.min(value, cap))
    .meta({ description: `default ${fallback}; values above ${cap} are clamped to ${cap}` });

export const boundedInt = (min: number, max: number) => numeric(number().int().min(min).max(max));
export const boundedNumber = (min: number, max: number) => numeric(number().min(min).max(max));

export const offset = numeric(number().int().min(0).max(1_000_000).default(0));

export const year = boundedInt(-100_000, 10_000);

/** A place segment (country, region, city) as paths spell it. */
export const place = z.string().regex(SLUG, 'a lowercase hyphenated slug, as in paths (united-states)');

export const tagList = z
  .string()
  .transform((value, ctx) => {
    const tags = value.split(',').map((item) => item.trim());
    const bad = tags.filter((item) => !tag.safeParse(item).success);
    if (bad.length > 0)
      ctx.addIssue({ code: 'custom', message: `tags are lowercase hyphenated slugs, comma-separated: ${bad.map((item) => JSON.stringify(item)).join(', ')}` });
    return [...new Set(tags)];
  })
  .meta({ description: 'comma-separated tags; a moment must carry all of them' });

/** A historical figure, matched by name parts whatever the case, accents or apostrophes (docs/graph.md). */
export const entity = z
  .string()
  .max(200)
  .transform((value, ctx) => {
    const words = queryWords(value);
    if (words.length === 0) ctx.addIssue({ code: 'custom', message: 'give a name, or part of one, with letters or digits' });
    if (words.length > 12) ctx.addIssue({ code: 'custom', message: 'at most 12 words' });
    return words;
  })
  .meta({
    description:
      'a historical figure: each word given is a word of one name the figure is known by, in any order, whatever the case, accents or apostrophes (Napoleon, bonaparte, jeanne d’arc)',
  });

export const format = z.enum(['json', 'tdf']).default('json').meta({ description: '`tdf` returns TDF records instead of moments' });

export const edgeTypes = (fallback: readonly EdgeType[]) =>
  z
    .string()
    .default(fallback.join(','))
    .transform((value, ctx) => {
      const { types, unknown } = parseEdgeTypes(value);
      if (unknown.length > 0) ctx.addIssue({ code: 'custom', message: `unknown edge types: ${unknown.join(', ')}` });
      if (types.length === 0) ctx.addIssue({ code: 'custom', message: 'list at least one edge type' });
      return types;
    })
    .meta({ description: `comma-separated edge types; default ${fallback.join(',')}` });

export const text = z.string().trim().min(1).max(200);

/** The paths a route answers besides its canonical one, so the gateway can forward `/api/v1/graph/*` unchanged. */
export function graphAliases(path: string): string[] {
  if (path.startsWith('/api/v1/graph/')) return [`/api/v1/${path.slice('/api/v1/graph/'.length)}`];
  if (path.startsWith('/api/v1/')) return [`/api/v1/graph/${path.slice('/api/v1/'.length)}`];
  return [`/api/v1${path}`, `/api/v1/graph${path}`];
}

export const yearRange = <T extends { year_from?: number | undefined; year_to?: number | undefined }>(value: T, ctx: z.RefinementCtx) => {
  if (value.year_from !== undefined && value.year_to !== undefined && value.year_from > value.year_to) {
    ctx.addIssue({ code: 'custom', path: ['year_from'], message: 'year_from must not be after year_to' });
  }
};
