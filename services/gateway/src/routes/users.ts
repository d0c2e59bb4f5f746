import { Readable } from 'node:stream';
import { defineRoute, linksTo, listEnvelope, type RouteDefinition } from '@tempora/kit/http';
import { z } from 'zod';
import { MAX_ACTIVE_API_KEYS } from '../accounts-service.ts';
import { ADMIN, API_KEY, API_KEY_SCOPES, BEARER, SERVICE } from '../credentials.ts';
import { TIERS } from '../domain/limits.ts';
import { ApiKeySchema, Page, UserExportSchema, UserSchema } from '../schemas.ts';
import { apiKeyView, userView } from '../views.ts';
import { currentUser, type GatewayRouteDeps } from './context.ts';

const ResolveBody = z.object({
  external_id: z.string().trim().min(1).max(256),
  provider: z
    .string()
    .regex(/^[a-z][a-z0-9_-]{0,31}$/)
    .default('external')
    .meta({ description: "namespace of external_id; apple, google and github are the sign-in providers' own" }),
  email: z.email().optional(),
  name: z.string().max(200).optional(),
});
const ResolveSchema = z.object({ user: UserSchema, created: z.boolean() }).meta({ id: 'ResolvedUser' });
const CreateKeyBody = z.object({
  name: z.string().trim().min(1).max(100),
  scopes: z
    .array(z.enum(API_KEY_SCOPES))
    .min(1)
    .default(['read', 'write'])
    .transform((scopes) => [...new Set(scopes)]),
});
const CreatedKeySchema = ApiKeySchema.extend({ key: z.string().meta({ description: 'the key itself: shown only in this response' }) }).meta({
  id: 'CreatedApiKey',
});

export function userRoutes(deps: GatewayRouteDeps): RouteDefinition[] {
  return [...userAdminRoutes(deps), ...ownDataRoutes(deps), ...apiKeyRoutes(deps)];
}

function userAdminRoutes({ accounts }: GatewayRouteDeps): RouteDefinition[] {
  return [
    defineRoute({
      method: 'post',
      path: '/api/v1/users/resolve',
      operationId: 'resolveUser',
      summary: 'Find or create a user by external ID',
      description: 'Safe under concurrent calls: the same external ID always resolves to one user. A created user receives the signup grant.',
      tags: ['users'],
      security: [SERVICE],
      body: ResolveBody,
      responses: { 200: { description: 'The existing user', schema: ResolveSchema }, 201: { description: 'A new user', schema: ResolveSchema } },
      handler: async (ctx, { body }) => {
        const { user, identities, created } = await accounts.resolve({
          provider: body.provider,
          subject: body.external_id,
          email: body.email,
          name: body.name,
        });
        ctx.status = created ? 201 : 200;
        return { user: userView(user, identities), created };
      },
    }),
    defineRoute({
      method: 'put',
      path: '/api/v1/users/{user_id}/tier',
      operationId: 'setUserTier',
      summary: "Set a user's tier (billing, admin)",
      description: 'Rate limits follow the new tier at once; access tokens carry it from their next refresh.',
      tags: ['users'],
      security: [SERVICE, ADMIN],
      params: z.object({ user_id: z.uuid() }),
      body: z.object({ tier: z.enum(TIERS) }),
      responses: { 200: { description: 'The updated user', schema: UserSchema }, 404: { description: 'No such user' } },
      handler: async (_ctx, { params, body }) => {
        const { user, identities } = await accounts.setTier(params.user_id, body.tier);
        return userView(user, identities);
      },
    }),
  ];
}

function ownDataRoutes({ accounts, proxy }: GatewayRouteDeps): RouteDefinition[] {
  return [
    defineRoute({
      method: 'get',
      path: '/api/v1/users/me/timepoints',
      operationId: 'listMyTimepoints',
      summary: "The user's generated scenes (from the generation service)",
      description: "Proxied to the generation service's GET /api/v1/users/me/timepoints with X-User-ID; query parameters pass through.",
      tags: ['users'],
      security: [BEARER, API_KEY],
      responses: {
        200: { description: 'Whatever the generation service answers' },
        502: { description: 'Generation unreachable' },
        504: { description: 'Generation timed out' },
      },
      handler: async (ctx) => {
        await proxy.forwardContext(ctx, { upstream: 'generation', user: currentUser(ctx), chargeable: false }, '/api/v1/users/me/timepoints');
        return undefined;
      },
    }),
    defineRoute({
      method: 'get',
      path: '/api/v1/users/me/export',
      operationId: 'exportMyData',
      summary: "Every piece of the user's data, from every service, as one JSON document",
      description:
        'Streamed: the profile, identities, sessions, API keys and the whole ledger, then under `services` each service\'s data by kind (generation: timepoints and jobs; graph: render jobs; simulation; conductor; billing). Every list has a fixed order: identities, sessions, API keys and each service\'s kinds oldest first (`created_at`, else `at`), then by id (`id`, else `job_id`, else `key`), the ledger in booking order. Nothing is truncated: a service that cannot answer is named in `errors` and the document ends with `"complete": false`. Format: docs/accounts.md.',
      tags: ['users'],
      security: [BEARER],
      responses: {
        200: { description: 'The export (Content-Disposition: attachment)', schema: UserExportSchema },
        404: { description: 'The account no longer exists' },
      },
      handler: async (ctx) => {
        const { userId } = currentUser(ctx);
        const document = await accounts.exportOf(userId, ctx.state.requestId);
        ctx.set('Content-Disposition', `attachment; filename="tempora-export-${userId}.json"`);
        ctx.set('Cache-Control', 'no-store');
        ctx.type = 'application/json';
        ctx.body = Readable.from(document);
        return undefined;
      },
    }),
  ];
}

function apiKeyRoutes({ accounts }: GatewayRouteDeps): RouteDefinition[] {
  return [
    defineRoute({
      method: 'post',
      path: '/api/v1/users/me/api-keys',
      operationId: 'createApiKey',
      summary: 'Create an API key',
      description: `The key is returned once, in this response; the gateway keeps only its SHA-256. At most ${MAX_ACTIVE_API_KEYS} active keys per user. Needs a Bearer token: an API key cannot mint keys.`,
      tags: ['api-keys'],
      security: [BEARER],
      body: CreateKeyBody,
      responses: {
        201: { description: 'The new key', schema: CreatedKeySchema, links: linksTo({ id: '$response.body#/id' }, 'revokeApiKey') },
        409: { description: 'Too many active keys' },
      },
      handler: async (ctx, { body }) => {
        const { row, key } = await accounts.createApiKey(currentUser(ctx).userId, body.name, body.scopes);
        ctx.status = 201;
        ctx.set('Cache-Control', 'no-store');
        ctx.set('Location', `/api/v1/users/me/api-keys/${row.id}`);
        return { ...apiKeyView(row), key };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/api/v1/users/me/api-keys',
      operationId: 'listApiKeys',
      summary: "The user's active API keys (without the keys themselves)",
      tags: ['api-keys'],
      security: [BEARER, API_KEY],
      query: Page,
      responses: { 200: { description: 'A page of keys', schema: listEnvelope(ApiKeySchema, 'ApiKeyList') } },
      handler: async (ctx, { query }) => {
        const page = await accounts.listApiKeys(currentUser(ctx).userId, query.limit, query.offset);
        return { items: page.items.map(apiKeyView), total: page.total, limit: query.limit, offset: query.offset };
      },
    }),
    defineRoute({
      method: 'delete',
      path: '/api/v1/users/me/api-keys/{id}',
      operationId: 'revokeApiKey',
      summary: 'Revoke an API key',
      description: 'An API key may revoke itself (a leaked key can be killed with the key alone), but no other key.',
      tags: ['api-keys'],
      security: [BEARER, API_KEY],
      params: z.object({ id: z.uuid() }),
      responses: { 204: { description: 'Revoked' }, 404: { description: 'No such active key of this user' } },
      handler: async (ctx, { params }) => {
        await accounts.revokeApiKey(currentUser(ctx), params.id);
        ctx.status = 204;
        return undefined;
      },
    }),
  ];
}
