import { canonicalize, eraOf, PathError, parsePath } from '@tempora/kit/moments';
import { z } from 'zod';
import { EDGE_TYPES, type EdgeType, SYMMETRIC_TYPES } from './edge-types.ts';
import { figureKeys } from './figure-names.ts';

/** The form of tags and of the place segments of a path (country, region, city). */
export const SLUG = /^[a-z0-9]+(?:-[a-z0-9]+)*$/;
export const MOMENT_TYPES = [
  'event',
  'battle',
  'war',
  'treaty',
  'founding',
  'coronation',
  'death',
  'birth',
  'discovery',
  'invention',
  'construction',
  'publication',
  'revolution',
  'reform',
  'disaster',
  'expedition',
  'religious',
  'political',
  'cultural',
  'economic',
  'scientific',
] as const;

/** A canonical path in a request: any form parsePath accepts, normalised to its leading-slash form. */
export const momentPath = z
  .string()
  .transform((value, ctx) => {
    try {
      return canonicalize(value);
    } catch (error) {
      ctx.addIssue({ code: 'custom', message: error instanceof PathError ? `${error.segment}: ${error.message}` : String(error) });
      return z.NEVER;
    }
  })
  .meta({
    description: 'Canonical path /year/month/day/HHMM/country/region/city/slug',
    example: '/1969/july/20/2017/united-states/florida/cape-canaveral/apollo-11-moon-landing',
  });

const label = z.string().trim().min(1).max(200);

/** A tag as moments carry it and filters name it. */
export const tag = z.string().regex(SLUG, 'tags are lowercase hyphenated slugs').max(60);

/** A curated edge carried with a moment: from this moment to `target`. */
export const EdgeInput = z.object({
  target: momentPath,
  type: z.enum(EDGE_TYPES),
  weight: z.number().min(0).max(1),
  theme: z.string().max(200).default(''),
  description: z.string().max(2000).default(''),
});
export type EdgeInput = z.output<typeof EdgeInput>;

/** What a writer may say about a moment; everything else (year, place, era) follows from the path. */
export const MomentInput = z.object({
  path: momentPath,
  event_name: label,
  description: z.string().max(2000).default(''),
  type: z.enum(MOMENT_TYPES).default('event'),
  layer: z.union([z.literal(0), z.literal(1), z.literal(2)]).default(1),
  status: z.enum(['active', 'pending', 'archived']).default('active'),
  visibility: z.enum(['public', 'private']).default('public'),
  figures: z.array(label).max(50).default([]),
  tags: z.array(tag).max(30).default([]),
  latitude: z.number().min(-90).max(90).nullable().default(null),
  longitude: z.number().min(-180).max(180).nullable().default(null),
  confidence: z.number().min(0).max(1).default(0.5),
  image_url: z.url().nullable().default(null),
  source_type: z
    .string()
    .regex(/^[a-z][a-z0-9_-]{0,30}$/)
    .default('ingest'),
  edges: z.array(EdgeInput).max(500).default([]),
});
export type MomentInput = z.output<typeof MomentInput>;

/** The columns a moment row is written with. */
export function momentColumns(input: MomentInput) {
  const parsed = parsePath(input.path);
  return {
    path: input.path,
    event_name: input.event_name,
    description: input.description,
    year: parsed.year,
    month_num: parsed.monthNum,
    day: parsed.day,
    time: parsed.time,
    country: parsed.country,
    region: parsed.region,
    city: parsed.city,
    slug: parsed.slug,
    era: eraOf(parsed.year),
    type: input.type,
    layer: input.layer,
    status: input.status,
    visibility: input.visibility,
    figures: input.figures,
    ...figureKeys(input.figures),
    tags: [...new Set(input.tags)],
    latitude: input.latitude,
    longitude: input.longitude,
    confidence: input.confidence,
    image_url: input.image_url,
    source_type: input.source_type,
  };
}

/** Symmetric edges are stored once, from the lower id, so (a,b) and (b,a) cannot both exist. */
export function storedOrder(sourceId: number, targetId: number, type: EdgeType): [number, number] {
  return SYMMETRIC_TYPES.has(type) && sourceId > targetId ? [targetId, sourceId] : [sourceId, targetId];
}

/** Years adjacent to `year` on the historical calendar, which has no year 0. */
export function adjacentYears(year: number): [number, number] {
  const before = year - 1 === 0 ? -1 : year - 1;
  const after = year + 1 === 0 ? 1 : year + 1;
  return [before, after];
}
