import { createHash } from 'node:crypto';
import { defineRoute, type RouteDefinition } from '@tempora/kit/http';
import { TdfRecordSchema } from '@tempora/kit/moments';
import type { Context } from 'koa';
import { z } from 'zod';
import type { TimepointRow } from '../repository/index.ts';
import { SceneSchema, VisibilityBodySchema } from '../schemas.ts';
import { type RouteDeps, userOf } from './context.ts';

const format = z
  .enum(['json', 'tdf'])
  .default('json')
  .meta({ description: '`tdf` returns the TDF envelope (same canonicalisation and hash as the graph service)' });
const idParams = z.object({ id: z.uuid() });

/** OpenAPI 3.1's binary body: the bytes themselves, no JSON (clients check the media type only). */
const ImageBytesSchema = z.string().meta({ format: 'binary' });

/**
 * How long caches may keep a scene's image (docs/generation.md, "Images"). Its bytes never change (a scene
 * is rendered once), but who may see them can: a scene without an owner (the graph renderer's) can never
 * be made private, so its image is cached for a year; an owned public scene may be made private at any
 * time, so shared caches keep it an hour; a private one only the owner's own cache keeps, revalidated.
 */
function imageCaching(row: TimepointRow): string {
  if (row.visibility === 'private') return 'private, no-cache';
  return row.owner === null ? 'public, max-age=31536000, immutable' : 'public, max-age=3600';
}

/**
 * Whether a conditional GET is answered 304, as RFC 9110 §13.2.2 orders it: If-None-Match (weak comparison)
 * when present, else If-Modified-Since. Koa's `fresh` is not used: it answers 200 to any request carrying
 * `Cache-Control: no-cache`, which fetch() adds to every conditional request, though that directive is
 * addressed to caches, not to the origin.
 */
function notModified(ctx: Context, etag: string, lastModified: Date): boolean {
  const noneMatch = ctx.get('If-None-Match');
  if (noneMatch) return noneMatch.trim() === '*' || noneMatch.split(',').some((tag) => tag.trim().replace(/^W\//, '') === etag);
  const since = Date.parse(ctx.get('If-Modified-Since'));
  return !Number.isNaN(since) && Math.floor(lastModified.getTime() / 1000) * 1000 <= since;
}

const ListQuery = z.object({
  limit: z.coerce.number().int().min(1).default(20).meta({ description: 'default 20; values above 100 are clamped' }),
  offset: z.coerce.number().int().min(0).max(1_000_000).default(0),
});

export function timepointRoutes(deps: RouteDeps): RouteDefinition[] {
  return [listRoute(deps), getRoute(deps), imageRoute(deps), visibilityRoute(deps), deleteRoute(deps)];
}

function listRoute({ timepoints }: RouteDeps): RouteDefinition {
  return defineRoute({
    method: 'get',
    path: '/api/v1/users/me/timepoints',
    aliases: ['/users/me/timepoints', '/api/v1/timepoints'],
    operationId: 'listMyTimepoints',
    summary: "The caller's scenes, newest first",
    description: 'The owner is X-User-ID; the gateway proxies `/users/me/timepoints` here. Public and private scenes of that owner, in the list envelope.',
    tags: ['timepoints'],
    security: ['UserId'],
    query: ListQuery,
    responses: {
      200: {
        description: 'A page of scene summaries',
        schema: z.object({ items: z.array(z.record(z.string(), z.unknown())), total: z.number(), limit: z.number(), offset: z.number() }),
      },
      401: { description: 'No X-User-ID' },
    },
    handler: async (ctx, { query }) => {
      // The account export pages everything through GET /api/v1/users/{user_id}/data (account-data.ts).
      const limit = Math.min(query.limit, 100);
      const page = await timepoints.list(userOf(ctx) as string, limit, query.offset);
      return { ...page, limit, offset: query.offset };
    },
  });
}

function getRoute({ timepoints }: RouteDeps): RouteDefinition {
  return defineRoute({
    method: 'get',
    path: '/api/v1/timepoints/{id}',
    operationId: 'getTimepoint',
    security: [],
    summary: 'One scene',
    description: 'Public scenes to anyone; private scenes only to their owner (X-User-ID). `format=tdf` returns the TDF envelope.',
    tags: ['timepoints'],
    params: idParams,
    query: z.object({ format }),
    responses: {
      200: { description: 'The scene record, or with `format=tdf` its TDF envelope', schema: z.union([SceneSchema, TdfRecordSchema]) },
      404: { description: 'No such scene (or private to someone else)' },
    },
    handler: (ctx, { params, query }) => timepoints.scene(params.id, userOf(ctx), query.format),
  });
}

function imageRoute({ timepoints }: RouteDeps): RouteDefinition {
  return defineRoute({
    method: 'get',
    path: '/api/v1/timepoints/{id}/image',
    operationId: 'getTimepointImage',
    security: [],
    summary: "A scene's generated image",
    description:
      "Public scenes' images to anyone, without a credential, cacheable (Cache-Control, a strong ETag of the bytes, Last-Modified; a conditional request is answered 304); private scenes' images only to their owner (X-User-ID), `private, no-cache`.",
    tags: ['timepoints'],
    params: idParams,
    responses: {
      200: {
        description: 'The image bytes, as the image model made them (Content-Type: their media type)',
        contentType: 'image/*',
        schema: ImageBytesSchema,
      },
      304: { description: "Not modified: the ETag in If-None-Match is the image's" },
      404: { description: 'No such scene, a private scene of someone else, or no stored image' },
    },
    handler: async (ctx, { params }) => {
      const { scene: row, image } = await timepoints.image(params.id, userOf(ctx));
      const etag = `"${createHash('sha256').update(image.data).digest('base64url')}"`;
      const created = new Date(row.created_at);
      ctx.set('Cache-Control', imageCaching(row));
      ctx.set('ETag', etag);
      ctx.lastModified = created;
      if (notModified(ctx, etag, created)) {
        ctx.status = 304;
        return undefined;
      }
      ctx.type = image.mime_type;
      ctx.body = image.data;
      return undefined;
    },
  });
}

function visibilityRoute({ timepoints }: RouteDeps): RouteDefinition {
  return defineRoute({
    method: 'patch',
    path: '/api/v1/timepoints/{id}',
    operationId: 'setTimepointVisibility',
    summary: "Change a scene's visibility",
    description: 'public ⇄ private, by the owner only. A scene without an owner cannot be changed.',
    tags: ['timepoints'],
    security: ['UserId'],
    params: idParams,
    body: VisibilityBodySchema,
    responses: {
      200: { description: 'The updated scene', schema: SceneSchema },
      403: { description: 'Not the owner' },
      404: { description: 'No such scene' },
    },
    handler: (ctx, { params, body }) => timepoints.setVisibility(params.id, userOf(ctx), body.visibility),
  });
}

function deleteRoute({ timepoints }: RouteDeps): RouteDefinition {
  return defineRoute({
    method: 'delete',
    path: '/api/v1/timepoints/{id}',
    operationId: 'deleteTimepoint',
    summary: 'Delete a scene (owner only)',
    tags: ['timepoints'],
    security: ['UserId'],
    params: idParams,
    responses: { 204: { description: 'Deleted' }, 403: { description: 'Not the owner' }, 404: { description: 'No such scene' } },
    handler: async (ctx, { params }) => {
      await timepoints.delete(params.id, userOf(ctx));
      ctx.status = 204;
      return undefined;
    },
  });
}
