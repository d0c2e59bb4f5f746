import { defineRoute, notFound, type RouteDefinition } from '@tempora/kit/http';
import { z } from 'zod';
import { CAUSAL_TYPES, PATH_DEFAULT_TYPES } from '../domain/edge-types.ts';
import { momentPath } from '../domain/moment.ts';
import { MomentNotFound } from '../graph-service.ts';
import { PathSchema, TraverseSchema } from '../schemas.ts';
import type { GraphRouteDeps } from './context.ts';
import { boundedInt, boundedNumber, cappedInt, edgeTypes, graphAliases, queryObject } from './params.ts';

export const TRAVERSE_LIMITS = { depth: { min: 1, max: 4, fallback: 2 }, limit: { fallback: 100, cap: 500 } } as const;
export const PATH_LIMITS = { maxHops: { fallback: 6, cap: 10 } } as const;

export const direction = z.enum(['past', 'future', 'both']).default('both');
export const depth = boundedInt(TRAVERSE_LIMITS.depth.min, TRAVERSE_LIMITS.depth.max).default(TRAVERSE_LIMITS.depth.fallback);

const TraverseQuery = queryObject({
  direction,
  depth,
  edge_types: edgeTypes(CAUSAL_TYPES),
  limit: cappedInt(TRAVERSE_LIMITS.limit.fallback, TRAVERSE_LIMITS.limit.cap),
  min_weight: boundedNumber(0, 1).default(0),
});

const PathQuery = queryObject({
  from: momentPath,
  to: momentPath,
  max_hops: cappedInt(PATH_LIMITS.maxHops.fallback, PATH_LIMITS.maxHops.cap),
  edge_types: edgeTypes(PATH_DEFAULT_TYPES),
});

/** Turns a missing anchor or endpoint into the spec's 404. */
export async function orNotFound<T>(work: Promise<T>): Promise<T> {
  try {
    return await work;
  } catch (error) {
    if (error instanceof MomentNotFound) throw notFound(error.message);
    throw error;
  }
}

export function traversalRoutes(deps: GraphRouteDeps): RouteDefinition[] {
  return [
    defineRoute({
      method: 'get',
      path: '/api/v1/graph/traverse/{path}',
      wildcard: 'path',
      aliases: graphAliases('/api/v1/graph/traverse/{path}'),
      operationId: 'traverse',
      summary: 'Multi-hop traversal',
      description:
        'Breadth-first expansion from the anchor. future follows out-edges of causes, precedes, influences and in-edges of caused_by, follows; past the reverse; both the union. Symmetric types are followed both ways, only when listed. hop is the BFS level at which a node was first reached; truncated is true when limit clipped the expansion.',
      tags: ['graph'],
      security: ['ServiceKey'],
      params: z.object({ path: momentPath }),
      query: TraverseQuery,
      responses: {
        200: { description: 'The anchor (hop 0), the nodes reached and the edges followed', schema: TraverseSchema },
        404: { description: 'The anchor does not exist' },
      },
      handler: (_ctx, { params, query }) =>
        orNotFound(
          deps.graph.traverse(params.path, {
            direction: query.direction,
            depth: query.depth,
            types: query.edge_types,
            limit: query.limit,
            minWeight: query.min_weight,
          }),
        ),
    }),
    defineRoute({
      method: 'get',
      path: '/api/v1/graph/path',
      aliases: graphAliases('/api/v1/graph/path'),
      operationId: 'shortestPath',
      summary: 'Shortest path between two moments',
      description:
        'Bidirectional breadth-first search treating edges as undirected. found is false (HTTP 200) when no path exists within max_hops; 404 only when an endpoint does not exist.',
      tags: ['graph'],
      security: ['ServiceKey'],
      query: PathQuery,
      responses: {
        200: { description: 'The path, nodes and edges in path order (hop = position)', schema: PathSchema },
        404: { description: 'An endpoint does not exist' },
      },
      handler: (_ctx, { query }) => orNotFound(deps.graph.path(query.from, query.to, { maxHops: query.max_hops, types: query.edge_types })),
    }),
  ];
}
