import { z } from 'zod';
import { parseEdgeTypes, type EdgeType } from '../domain/edge-types.ts';

/**
 * Query parameters shared by the graph routes. Values above a documented cap are clamped to the cap
 * (the response says which value was used); values outside a rule's range are refused with 422.
 */
export const cappedInt = (fallback: number, cap: number, min = 1) =>
  z.coerce
    .number()
    .int()
    .min(min)
    .default(fallback)
    .transform((value) => Math.min(value, cap))
    .meta({ description: `default ${fallback}; values above ${cap} are clamped to ${cap}` });

export const offset = z.coerce.number().int().min(0).max(1_000_000).default(0);

export const year = z.coerce.number().int().min(-100_000).max(10_000);

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
