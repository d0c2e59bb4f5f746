import { listEnvelope } from '@tempora/kit/http';
import { z } from 'zod';
import { EDGE_TYPES } from './domain/edge-types.ts';
import { MomentInput } from './domain/moment.ts';

/** Response shapes: the OpenAPI document, the MCP output schemas and the tests all use these. */

export const EdgeSchema = z
  .object({
    source: z.string(),
    target: z.string(),
    type: z.enum(EDGE_TYPES),
    weight: z.number(),
    theme: z.string(),
    description: z.string(),
  })
  .meta({ id: 'Edge' });

export const MomentSchema = z
  .object({
    path: z.string(),
    event_name: z.string(),
    year: z.number().int(),
    layer: z.number().int().min(0).max(2),
    figures: z.array(z.string()),
    tags: z.array(z.string()),
    image_url: z.string().nullable(),
    description: z.string(),
    month: z.string(),
    month_num: z.number().int(),
    day: z.number().int(),
    time: z.string(),
    country: z.string(),
    region: z.string(),
    city: z.string(),
    era: z.string(),
    type: z.string(),
    latitude: z.number().nullable(),
    longitude: z.number().nullable(),
    confidence: z.number(),
    status: z.string(),
    source_type: z.string(),
    updated_at: z.string(),
  })
  .meta({ id: 'Moment' });

export const MomentDetailSchema = MomentSchema.extend({
  visibility: z.enum(['public', 'private']),
  edges: z.array(EdgeSchema),
  edge_count: z.number().int(),
}).meta({ id: 'MomentDetail' });

export const SearchHitSchema = MomentSchema.extend({ score: z.number() }).meta({ id: 'SearchHit' });

export const MomentListSchema = listEnvelope(MomentSchema, 'MomentList');
export const SearchResultSchema = listEnvelope(SearchHitSchema, 'SearchResult');

export const NodeSchema = z
  .object({
    id: z.string(),
    name: z.string(),
    year: z.number().int(),
    month_num: z.number().int(),
    day: z.number().int(),
    era: z.string(),
    type: z.string(),
    layer: z.number().int(),
    country: z.string(),
    region: z.string(),
    city: z.string(),
    latitude: z.number().nullable(),
    longitude: z.number().nullable(),
    confidence: z.number(),
    status: z.string(),
    hop: z.number().int(),
  })
  .meta({ id: 'Node' });

export const TraverseSchema = z
  .object({
    anchor: z.string(),
    direction: z.enum(['past', 'future', 'both']),
    depth: z.number().int(),
    edge_types: z.array(z.enum(EDGE_TYPES)),
    limit: z.number().int(),
    nodes: z.array(NodeSchema),
    edges: z.array(EdgeSchema),
    node_count: z.number().int(),
    edge_count: z.number().int(),
    truncated: z.boolean(),
  })
  .meta({ id: 'Traversal' });

export const PathSchema = z
  .object({
    found: z.boolean(),
    from: z.string(),
    to: z.string(),
    hops: z.number().int(),
    max_hops: z.number().int(),
    edge_types: z.array(z.enum(EDGE_TYPES)),
    nodes: z.array(NodeSchema),
    edges: z.array(EdgeSchema),
  })
  .meta({ id: 'Path' });

export const StatsSchema = z
  .object({
    total_nodes: z.number().int(),
    total_edges: z.number().int(),
    layer_counts: z.record(z.string(), z.number().int()),
    edge_type_counts: z.record(z.string(), z.number().int()),
    source_type_counts: z.record(z.string(), z.number().int()),
    date_range: z.object({ min_year: z.number().int().nullable(), max_year: z.number().int().nullable() }),
    avg_confidence: z.number(),
    last_updated: z.string().nullable(),
    nodes_with_images: z.number().int(),
  })
  .meta({ id: 'GraphStats' });

export const BrowseSchema = z
  .object({
    prefix: z.string(),
    depth: z.number().int(),
    segment: z.string().nullable().meta({ description: 'Name of the next segment (year, month, ...); null at a full path' }),
    children: z.array(
      z.object({
        segment: z.string(),
        path: z.string(),
        count: z.number().int(),
        moment: MomentSchema.optional(),
      }),
    ),
    total: z.number().int(),
  })
  .meta({ id: 'Browse' });

export { TdfRecordSchema } from '@tempora/kit/moments';

/** What POST /ingest/tdf accepts per record: envelope fields optional, payload required. */
export const TdfIngestRecord = z.object({
  id: z.string().optional(),
  version: z.string().optional(),
  source: z.string().optional(),
  timestamp: z.string().optional(),
  provenance: z.record(z.string(), z.unknown()).optional(),
  payload: MomentInput,
  entity_ids: z.array(z.string()).optional(),
  tdf_hash: z
    .string()
    .regex(/^[0-9a-f]{64}$/, 'a lowercase hex SHA-256')
    .optional(),
});

export const IngestResultSchema = z
  .object({
    ingested: z.number().int(),
    created: z.number().int(),
    updated: z.number().int(),
    paths: z.array(z.string()),
  })
  .meta({ id: 'IngestResult' });

export const RenderJobSchema = z
  .object({
    id: z.string(),
    status: z.enum(['queued', 'running', 'succeeded', 'failed']),
    path: z.string(),
    requested_by: z.string(),
    request: z.record(z.string(), z.unknown()),
    attempts: z.number().int(),
    error: z.string().nullable(),
    scene_id: z.string().nullable().meta({ description: "the generation service's scene, once the job succeeded" }),
    created_at: z.string(),
    updated_at: z.string(),
  })
  .meta({ id: 'RenderJob' });

export const GenerateResultSchema = z
  .object({ job: RenderJobSchema, moment: z.object({ path: z.string(), layer: z.number().int(), created: z.boolean() }) })
  .meta({ id: 'GenerateAccepted' });
