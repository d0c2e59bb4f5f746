import { defineRoute, listEnvelope, type RouteDefinition } from '@tempora/kit/http';
import { z } from 'zod';
import { BEARER } from '../credentials.ts';
import type { ExternalIdentity } from '../domain/providers.ts';
import { IdentitySchema } from '../schemas.ts';
import { identityView } from '../views.ts';
import { AppleBody, GitHubBody, GoogleBody } from './auth.ts';
import { currentUser, type GatewayRouteDeps } from './context.ts';

const linkResponses = {
  200: { description: 'Already linked to this account', schema: IdentitySchema },
  201: { description: 'Linked: signing in with it now reaches this account', schema: IdentitySchema },
  401: { description: "The provider's token or code was refused" },
  409: { description: 'That identity signs in to another account; accounts are never merged' },
  502: { description: 'The identity provider could not be reached' },
  503: { description: 'This provider is not configured' },
};

/**
 * Linking sign-in providers to one account (docs/gateway.md, "Linked providers"): the identity is proven
 * as at sign-in, then bound to the signed-in account, never to another one. Bearer only: an API key cannot
 * add or remove a way into the account.
 */
export function identityRoutes(deps: GatewayRouteDeps): RouteDefinition[] {
  const { accounts } = deps;
  const { providers } = deps.auth;

  async function link(ctx: Parameters<RouteDefinition['handler']>[0], identity: ExternalIdentity) {
    const { linked, identity: row } = await accounts.link(currentUser(ctx).userId, identity);
    ctx.status = linked ? 201 : 200;
    return identityView(row);
  }

  const linkRoute = <B extends z.ZodType>(provider: 'apple' | 'google' | 'github', body: B, verify: (body: z.output<B>) => Promise<ExternalIdentity>) =>
    defineRoute({
      method: 'post',
      path: `/api/v1/auth/me/identities/${provider}`,
      operationId: `link${provider === 'github' ? 'GitHub' : provider[0]!.toUpperCase() + provider.slice(1)}`,
      summary: `Link a ${provider === 'github' ? 'GitHub' : provider[0]!.toUpperCase() + provider.slice(1)} sign-in to the account`,
      description: `The same body as \`POST /api/v1/auth/${provider}\`, proven the same way.`,
      tags: ['auth'],
      security: [BEARER],
      body,
      responses: linkResponses,
      handler: async (ctx, { body: proof }) => link(ctx, await verify(proof)),
    });

  return [
    defineRoute({
      method: 'get',
      path: '/api/v1/auth/me/identities',
      operationId: 'listIdentities',
      summary: 'The sign-in identities linked to the account',
      tags: ['auth'],
      security: [BEARER],
      responses: { 200: { description: 'Every linked identity, oldest first', schema: listEnvelope(IdentitySchema, 'IdentityList') } },
      handler: async (ctx) => {
        const items = (await accounts.identities(currentUser(ctx).userId)).map(identityView);
        return { items, total: items.length, limit: items.length, offset: 0 };
      },
    }),
    linkRoute('apple', AppleBody, (body) => providers.apple.verify(body.identity_token, body.nonce)),
    linkRoute('google', GoogleBody, (body) => providers.google.verify(body.id_token, body.nonce)),
    linkRoute('github', GitHubBody, (body) => providers.github.verify(body.code, body.redirect_uri, body.code_verifier)),
    defineRoute({
      method: 'delete',
      path: '/api/v1/auth/me/identities/{provider}/{subject}',
      operationId: 'unlinkIdentity',
      summary: 'Unlink a sign-in identity while another remains',
      tags: ['auth'],
      security: [BEARER],
      params: z.object({ provider: z.string().min(1).max(32), subject: z.string().min(1).max(256) }),
      responses: {
        204: { description: 'Unlinked: signing in with it no longer reaches this account' },
        404: { description: 'No such identity on this account' },
        409: { description: "It is the account's last way to sign in" },
      },
      handler: async (ctx, { params }) => {
        await accounts.unlink(currentUser(ctx).userId, params.provider, params.subject);
        ctx.status = 204;
        return undefined;
      },
    }),
  ];
}
