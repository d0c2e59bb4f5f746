import { figureEntityId, MONTHS, placeEntityId, type TdfRecord, toTdf } from '@tempora/kit/moments';
import { type EdgeType, typeOf } from './domain/edge-types.ts';
import type { StoredEdge } from './domain/graph-search.ts';
import type { EdgeRow, MomentRow } from './repository/index.ts';

/** A moment as the list endpoints return it: the spec's fields first, then the rest of its metadata. */
export function momentView(row: MomentRow) {
  return {
    path: row.path,
    event_name: row.event_name,
    year: row.year,
    layer: row.layer,
    figures: row.figures,
    tags: row.tags,
    image_url: row.image_url,
    description: row.description,
    month: MONTHS[row.month_num - 1] as string,
    month_num: row.month_num,
    day: row.day,
    time: row.time,
    country: row.country,
    region: row.region,
    city: row.city,
    era: row.era,
    type: row.type,
    latitude: row.latitude,
    longitude: row.longitude,
    confidence: row.confidence,
    status: row.status,
    source_type: row.source_type,
    updated_at: row.updated_at.toISOString(),
  };
}

export function edgeView(edge: Pick<EdgeRow, 'source' | 'target' | 'type' | 'weight' | 'theme' | 'description'>) {
  return { source: edge.source, target: edge.target, type: edge.type, weight: edge.weight, theme: edge.theme, description: edge.description };
}
export type EdgeView = ReturnType<typeof edgeView>;

/** One moment with its visibility and every edge touching it (GET /api/v1/moments/{path}, MCP graph_moment). */
export function momentDetailView(row: MomentRow, edges: readonly EdgeRow[]) {
  return { ...momentView(row), visibility: row.visibility, edges: edges.map(edgeView), edge_count: edges.length };
}

/** A node of a traversal or path response. */
export function nodeView(row: MomentRow, hop: number) {
  return {
    id: row.path,
    name: row.event_name,
    year: row.year,
    month_num: row.month_num,
    day: row.day,
    era: row.era,
    type: row.type,
    layer: row.layer,
    country: row.country,
    region: row.region,
    city: row.city,
    latitude: row.latitude,
    longitude: row.longitude,
    confidence: row.confidence,
    status: row.status,
    hop,
  };
}
export type NodeView = ReturnType<typeof nodeView>;

/** Resolves stored edges (moment ids, type codes) into response edges with paths and details. */
export function storedEdgeView(edge: StoredEdge, paths: Map<number, string>, details: Map<string, { theme: string; description: string }>): EdgeView {
  const detail = details.get(`${edge.source}:${edge.target}:${edge.type}`);
  return {
    source: paths.get(edge.source) ?? '',
    target: paths.get(edge.target) ?? '',
    type: typeOf(edge.type) as EdgeType,
    weight: Math.round(edge.weight * 1e6) / 1e6,
    theme: detail?.theme ?? '',
    description: detail?.description ?? '',
  };
}

/** A stored moment as exactly what ingest accepts for it (a TDF payload), with the given curated edges. */
export function momentPayload<E>(row: MomentRow, edges: E[]) {
  return {
    path: row.path,
    event_name: row.event_name,
    description: row.description,
    type: row.type,
    layer: row.layer,
    status: row.status,
    visibility: row.visibility,
    figures: row.figures,
    tags: row.tags,
    latitude: row.latitude,
    longitude: row.longitude,
    confidence: row.confidence,
    image_url: row.image_url,
    source_type: row.source_type,
    edges,
  };
}

/**
 * The TDF record of a moment. The payload holds exactly what `POST /ingest/tdf` accepts (fields derived
 * from the path are left out, automatic links too, since ingest re-derives them), so exporting and
 * ingesting a record reproduces the same payload and therefore the same tdf_hash.
 */
export function momentTdf(row: MomentRow, curatedOutgoing: readonly EdgeRow[], serviceVersion: string): TdfRecord {
  const edges = curatedOutgoing
    .map((edge) => ({ target: edge.target, type: edge.type, weight: edge.weight, theme: edge.theme, description: edge.description }))
    .sort((a, b) => a.target.localeCompare(b.target) || a.type.localeCompare(b.type));
  return toTdf({
    id: row.path,
    source: 'tempora-graph',
    timestamp: row.updated_at.toISOString(),
    provenance: { service: 'graph', service_version: serviceVersion, source_type: row.source_type, layer: row.layer, confidence: row.confidence },
    payload: momentPayload(row, edges),
    entity_ids: [...row.figures.map(figureEntityId), placeEntityId(row.country, row.region, row.city)],
  });
}
