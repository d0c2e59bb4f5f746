import type { EdgeType } from '../domain/edge-types.ts';

/** A moment as the repository reads it: every column but the search document and the bookkeeping ones. */
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

/** An edge with the paths of both ends. */
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
  moment_visibility: string;
}

/** The columns a MomentRow is read from. */
export const MOMENT_COLUMNS = [
  'id',
  'path',
  'event_name',
  'description',
  'year',
  'month_num',
  'day',
  'time',
  'country',
  'region',
  'city',
  'slug',
  'era',
  'type',
  'layer',
  'status',
  'visibility',
  'figures',
  'tags',
  'latitude',
  'longitude',
  'confidence',
  'image_url',
  'source_type',
  'created_at',
  'updated_at',
];

/** The columns a traversal or path node shows. */
export const NODE_COLUMNS = [
  'id',
  'path',
  'event_name',
  'year',
  'month_num',
  'day',
  'era',
  'type',
  'layer',
  'country',
  'region',
  'city',
  'latitude',
  'longitude',
  'confidence',
  'status',
];

/**
 * What public reads show (SQL over the moments table, or its `alias`): public moments that the Judge or a
 * writer has passed. A pending moment (an Expander's or Daily's proposal, model-written metadata, a
 * writer's proposal) and a rejected one (archived and private) are seen only by service-key and writer
 * callers, one at a time by path. Lists, search, browse, today, random, stats, the adjacency index (so
 * traversal and path) and the MCP tools all read through it.
 */
export function published(alias?: string): string {
  const column = alias ? `${alias}.` : '';
  return `(${column}visibility = 'public' and ${column}status <> 'pending')`;
}

/** MOMENT_COLUMNS of a query's table alias. */
export const prefixed = (alias: string) => MOMENT_COLUMNS.map((column) => `${alias}.${column}`);

// pg returns bigint and numeric columns as strings.
export const normaliseMoment = (row: MomentRow): MomentRow => ({ ...row, id: Number(row.id), confidence: Number(row.confidence) });
export const normaliseEdge = (row: EdgeRow): EdgeRow => ({
  ...row,
  id: Number(row.id),
  source_id: Number(row.source_id),
  target_id: Number(row.target_id),
  weight: Number(row.weight),
});
