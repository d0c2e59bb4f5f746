import { z } from 'zod';
import type { Context } from 'koa';
import { defineRoute, type RouteDefinition, forbidden, notFound, unauthorized } from '@tempora/kit/http';
import type { TimepointRow } from '../repository.ts';
import { sceneSummary, sceneTdf } from '../scene.ts';
import { SceneSchema, VisibilityBodySchema } from '../schemas.ts';
import { isService, userOf, type RouteDeps } from './context.ts';

const format = z.enum(['json', 'tdf']).default('json').meta({ description: '`tdf` returns the TDF envelope (same canonicalisation and hash as the graph service)' });
const idParams = z.object({ id: z.uuid() });

/** Private scenes exist only for their owner: anyone else gets 404, not 403, so nothing leaks. */
function visible(ctx: Context, row: TimepointRow | undefined, id: string): TimepointRow {
  if (!row || (row.visibility === 'private' && row.owner !== userOf(ctx))) throw notFound(`no timepoint ${id}`);
  return row;
}

/** Changing or deleting a scene: its owner only. */
function owned(ctx: Context, row: TimepointRow | undefined, id: string): TimepointRow {
  const user = userOf(ctx);
  const found = visible(ctx, row, id);
  if (!user) throw unauthorized('send X-User-ID (the gateway sets it)', 'ApiKey header="X-User-ID"');
  if (found.owner !== user) throw forbidden('only the owner of a scene may change it');
  return found;
}

const ListQuery = z.object({
  limit: z.coerce.number().int().min(1).default(20).meta({ description: 'default 20; values above 100 (1000 for service-key callers, e.g. the gateway\'s data export) are clamped' }),
  offset: z.coerce.number().int().min(0).max(1_000_000).default(0),
});

export function timepointRoutes(deps: RouteDeps): RouteDefinition[] {
  const { repository } = deps;
  return [
    defineRoute({
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
        200: { description: 'A page of scene summaries', schema: z.object({ items: z.array(z.record(z.string(), z.unknown())), total: z.number(), limit: z.number(), offset: z.number() }) },
        401: { description: 'No X-User-ID' },
      },
      handler: async (ctx, { query }) => {
        const limit = Math.min(query.limit, isService(ctx) ? 1000 : 100);
        const page = await repository.listByOwner(userOf(ctx) as string, limit, query.offset);
        return { items: page.items.map((row) => sceneSummary(row.record)), total: page.total, limit, offset: query.offset };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/api/v1/timepoints/{id}',
      operationId: 'getTimepoint',
      summary: 'One scene',
      description: 'Public scenes to anyone; private scenes only to their owner (X-User-ID). `format=tdf` returns the TDF envelope.',
      tags: ['timepoints'],
      params: idParams,
      query: z.object({ format }),
      responses: { 200: { description: 'The scene record or its TDF envelope', schema: SceneSchema }, 404: { description: 'No such scene (or private to someone else)' } },
      handler: async (ctx, { params, query }) => {
        const row = visible(ctx, await repository.timepoint(params.id), params.id);
        return query.format === 'tdf' ? sceneTdf(row.record, deps.version) : row.record;
      },
    }),
    defineRoute({
      method: 'get',
      path: '/api/v1/timepoints/{id}/image',
      operationId: 'getTimepointImage',
      summary: "A scene's generated image",
      tags: ['timepoints'],
      params: idParams,
      responses: { 200: { description: 'The image bytes', contentType: 'image/*' }, 404: { description: 'No such scene or no stored image' } },
      handler: async (ctx, { params }) => {
        visible(ctx, await repository.timepoint(params.id), params.id);
        const image = await repository.image(params.id);
        if (!image) throw notFound(`timepoint ${params.id} has no stored image`);
        ctx.type = image.mime_type;
        ctx.set('Cache-Control', 'private, max-age=3600');
        ctx.body = image.data;
        return undefined;
      },
    }),
    defineRoute({
      method: 'patch',
      path: '/api/v1/timepoints/{id}',
      operationId: 'setTimepointVisibility',
      summary: "Change a scene's visibility",
      description: 'public ⇄ private, by the owner only. A scene without an owner cannot be changed.',
      tags: ['timepoints'],
      security: ['UserId'],
      params: idParams,
      body: VisibilityBodySchema,
      responses: { 200: { description: 'The updated scene', schema: SceneSchema }, 403: { description: 'Not the owner' }, 404: { description: 'No such scene' } },
      handler: async (ctx, { params, body }) => {
        owned(ctx, await repository.timepoint(params.id), params.id);
        const row = await repository.setVisibility(params.id, body.visibility);
        if (!row) throw notFound(`no timepoint ${params.id}`);
        return row.record;
      },
    }),
    defineRoute({
      method: 'delete',
      path: '/api/v1/timepoints/{id}',
      operationId: 'deleteTimepoint',
      summary: 'Delete a scene (owner only)',
      tags: ['timepoints'],
      security: ['UserId'],
      params: idParams,
      responses: { 204: { description: 'Deleted' }, 403: { description: 'Not the owner' }, 404: { description: 'No such scene' } },
      handler: async (ctx, { params }) => {
        owned(ctx, await repository.timepoint(params.id), params.id);
        await repository.deleteTimepoint(params.id);
        ctx.status = 204;
        return undefined;
      },
    }),
    defineRoute({
      method: 'delete',
      path: '/api/v1/users/{user_id}/timepoints',
      operationId: 'deleteUserTimepoints',
      summary: "Delete every scene and job of a user (account deletion)",
      description: 'Called by the gateway with X-Service-Key when an account is deleted. Idempotent: 204 whether or not anything was there.',
      tags: ['timepoints'],
      security: ['ServiceKey'],
      params: z.object({ user_id: z.string().min(1).max(128) }),
      responses: { 204: { description: 'Deleted (or nothing to delete)' }, 401: { description: 'No or wrong X-Service-Key' } },
      handler: async (ctx, { params }) => {
        await repository.deleteOwner(params.user_id);
        ctx.status = 204;
        return undefined;
      },
    }),
  ];
}
