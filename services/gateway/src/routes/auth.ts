import { defineRoute, type RouteDefinition } from '@tempora/kit/http';
import type { Context } from 'koa';
import { z } from 'zod';
import type { SignedIn } from '../auth-service.ts';
import { ADMIN, API_KEY, BEARER } from '../credentials.ts';
import { TIERS } from '../domain/limits.ts';
import { AccountDeletionReportSchema, JwksSchema, SignInSchema, TokenPairSchema, UserSchema } from '../schemas.ts';
import { userView } from '../views.ts';
import { currentUser, type GatewayRouteDeps } from './context.ts';

const token = z.string().min(10).max(10_000);
export const AppleBody = z.object({
  identity_token: token.meta({ description: 'the identity token Sign in with Apple returned to the app' }),
  nonce: z.string().min(1).max(512).optional().meta({ description: "the raw nonce the app sent (its SHA-256 or itself must equal the token's nonce claim)" }),
  name: z.string().max(200).optional().meta({ description: 'the name Apple gave the app at the first sign-in (it is not in the token)' }),
});
export const GoogleBody = z.object({ id_token: token, nonce: z.string().min(1).max(512).optional() });
export const GitHubBody = z.object({
  code: z.string().min(1).max(512),
  redirect_uri: z.url().optional(),
  code_verifier: z.string().min(43).max(128).optional().meta({ description: 'PKCE verifier, when the authorization request carried a challenge' }),
});
const RefreshBody = z.object({ refresh_token: z.string().min(1).max(512) });
const LogoutBody = z
  .object({ refresh_token: z.string().min(1).max(512).optional().meta({ description: 'the session to end; omit to end every session of the account' }) })
  .default({});
const DevTokenBody = z.object({
  user_id: z.uuid().optional().meta({ description: 'an existing user; otherwise the user with external_id is found or created' }),
  external_id: z.string().min(1).max(256).default('dev-user'),
  email: z.email().optional(),
  name: z.string().max(200).optional(),
  tier: z.enum(TIERS).optional().meta({ description: "sets the user's tier" }),
});
const ServiceTokenBody = z.object({
  service: z
    .string()
    .regex(/^[a-z][a-z0-9-]{1,62}$/)
    .meta({ description: 'the calling service, e.g. conductor' }),
  ttl_seconds: z.coerce.number().int().min(60).optional(),
});
const ServiceTokenSchema = z
  .object({ access_token: z.string(), token_type: z.literal('Bearer'), expires_in: z.number().int(), subject: z.string() })
  .meta({ id: 'ServiceToken' });

const signInResponses = {
  200: { description: 'Signed in: a token pair for an existing account', schema: SignInSchema },
  201: { description: 'Signed up: a new account (with its signup grant) and a token pair', schema: SignInSchema },
  502: { description: 'The identity provider could not be reached' },
  503: { description: 'This provider is not configured' },
};

/** The answer to a sign-in: 201 with a new account, 200 with an existing one. */
function signedIn(ctx: Context, { pair, user, identities, created }: SignedIn) {
  ctx.status = created ? 201 : 200;
  ctx.set('Cache-Control', 'no-store');
  return { ...pair, user: userView(user, identities), new_user: created };
}

export function authRoutes(deps: GatewayRouteDeps): RouteDefinition[] {
  return [jwksRoute(deps), ...providerSignInRoutes(deps), demoSignInRoute(deps), ...sessionRoutes(deps), ...accountRoutes(deps), ...adminTokenRoutes(deps)];
}

function jwksRoute({ auth }: GatewayRouteDeps): RouteDefinition {
  return defineRoute({
    method: 'get',
    path: '/.well-known/jwks.json',
    operationId: 'getJwks',
    security: [],
    summary: 'The public keys that verify gateway access tokens',
    description: 'ES256 keys. During a rotation the previous key stays listed until every token it signed has expired.',
    tags: ['auth'],
    responses: { 200: { description: 'A JWK Set', schema: JwksSchema } },
    handler: (ctx) => {
      ctx.set('Cache-Control', 'public, max-age=300');
      return auth.jwks();
    },
  });
}

function providerSignInRoutes({ auth }: GatewayRouteDeps): RouteDefinition[] {
  const { providers } = auth;
  return [
    defineRoute({
      method: 'post',
      path: '/api/v1/auth/apple',
      operationId: 'signInWithApple',
      security: [],
      summary: 'Sign in with Apple',
      tags: ['auth'],
      body: AppleBody,
      responses: signInResponses,
      handler: async (ctx, { body }) => signedIn(ctx, await auth.signIn('apple', () => providers.apple.verify(body.identity_token, body.nonce), body.name)),
    }),
    defineRoute({
      method: 'post',
      path: '/api/v1/auth/google',
      operationId: 'signInWithGoogle',
      security: [],
      summary: 'Sign in with Google',
      tags: ['auth'],
      body: GoogleBody,
      responses: signInResponses,
      handler: async (ctx, { body }) => signedIn(ctx, await auth.signIn('google', () => providers.google.verify(body.id_token, body.nonce))),
    }),
    defineRoute({
      method: 'post',
      path: '/api/v1/auth/github',
      operationId: 'signInWithGitHub',
      security: [],
      summary: 'Sign in with GitHub',
      description: 'Exchanges the OAuth authorization code at GitHub and identifies the user through its user API.',
      tags: ['auth'],
      body: GitHubBody,
      responses: signInResponses,
      handler: async (ctx, { body }) =>
        signedIn(ctx, await auth.signIn('github', () => providers.github.verify(body.code, body.redirect_uri, body.code_verifier))),
    }),
  ];
}

function demoSignInRoute({ auth, config }: GatewayRouteDeps): RouteDefinition {
  return defineRoute({
    method: 'post',
    path: '/api/v1/auth/demo',
    operationId: 'signInDemo',
    security: [],
    summary: 'Demo sign-in (store review)',
    description: `Creates a fresh demo account with ${config.DEMO_CREDITS} credits and signs it in. Limited to ${config.DEMO_SIGNINS_PER_HOUR} per IP address per hour${
      config.DEMO_SIGNINS_PER_HOUR_LOOPBACK === undefined ? '' : ` (${config.DEMO_SIGNINS_PER_HOUR_LOOPBACK} from a loopback address)`
    }; the rate-limit headers then describe that window.`,
    tags: ['auth'],
    responses: {
      201: { description: 'A new demo account and its token pair', schema: SignInSchema },
      403: { description: 'Demo sign-in is disabled' },
      429: { description: 'This address has used its demo sign-ins of the hour (retry_after, retry_at and Retry-After say when the next is possible)' },
    },
    handler: async (ctx) => {
      const demo = await auth.demoSignIn(ctx.ip, (state) => {
        // The tighter window is the one to report: nearly always this one.
        if (state.remaining <= Number(ctx.response.get('X-RateLimit-Remaining') || Infinity)) {
          ctx.set({
            'X-RateLimit-Limit': String(state.limit),
            'X-RateLimit-Remaining': String(state.remaining),
            'X-RateLimit-Reset': String(state.resetSeconds),
          });
        }
      });
      return signedIn(ctx, demo);
    },
  });
}

function sessionRoutes({ auth }: GatewayRouteDeps): RouteDefinition[] {
  return [
    defineRoute({
      method: 'post',
      path: '/api/v1/auth/refresh',
      operationId: 'refreshTokens',
      security: [],
      summary: 'Exchange a refresh token for a new token pair',
      description:
        'The refresh token is single-use: presenting one that was already exchanged (after a short grace window) revokes every token of its sign-in.',
      tags: ['auth'],
      body: RefreshBody,
      responses: {
        200: { description: 'A new token pair', schema: TokenPairSchema },
        401: { description: 'Unknown, expired, revoked or reused refresh token' },
      },
      handler: async (ctx, { body }) => {
        ctx.set('Cache-Control', 'no-store');
        return auth.refresh(body.refresh_token);
      },
    }),
    defineRoute({
      method: 'post',
      path: '/api/v1/auth/logout',
      operationId: 'logout',
      summary: 'Sign out',
      description: "Revokes the given refresh token's session, or every session when none is given, and the access token presented.",
      tags: ['auth'],
      security: [BEARER],
      body: LogoutBody,
      responses: { 204: { description: 'Signed out' } },
      handler: async (ctx, { body }) => {
        const user = currentUser(ctx);
        await auth.logout(user.userId, body.refresh_token, user.token);
        ctx.status = 204;
        return undefined;
      },
    }),
  ];
}

function accountRoutes({ accounts }: GatewayRouteDeps): RouteDefinition[] {
  return [
    defineRoute({
      method: 'get',
      path: '/api/v1/auth/me',
      operationId: 'getMe',
      summary: 'The signed-in user',
      tags: ['auth'],
      security: [BEARER, API_KEY],
      responses: { 200: { description: 'The profile', schema: UserSchema } },
      handler: async (ctx) => {
        const user = currentUser(ctx);
        return userView(user.user, await accounts.identities(user.userId));
      },
    }),
    defineRoute({
      method: 'delete',
      path: '/api/v1/auth/me',
      operationId: 'deleteMe',
      summary: 'Delete the account and all its data, in every service',
      description:
        "Removes the gateway's rows at once (identities, sessions, API keys, ledger: every credential stops working) and records the deletion durably; then asks every service holding the user's data (generation, graph, simulation, conductor, billing, which also cancels a paid Stripe plan) to delete it, retrying one that is down until it confirms. 200 when every service confirmed, 202 while some part is pending. Idempotent: a still-valid access token of the deleted account gets the deletion's current report (204 when none is on record). See docs/accounts.md.",
      tags: ['auth'],
      security: [BEARER],
      responses: {
        200: { description: 'Deleted everywhere: what each service deleted and kept', schema: AccountDeletionReportSchema },
        202: { description: "Deleted here; some services' parts are pending and retried", schema: AccountDeletionReportSchema },
        204: { description: 'No such account and no deletion of it on record' },
      },
      handler: async (ctx) => {
        const userId = ctx.state.deletedUserId ?? currentUser(ctx).userId;
        const report = await accounts.delete(userId, ctx.state.requestId);
        if (!report) {
          ctx.status = 204;
          return undefined;
        }
        ctx.status = report.status === 'completed' ? 200 : 202;
        return report;
      },
    }),
  ];
}

function adminTokenRoutes({ auth }: GatewayRouteDeps): RouteDefinition[] {
  return [
    defineRoute({
      method: 'post',
      path: '/api/v1/auth/dev/token',
      operationId: 'issueDevToken',
      summary: 'Issue a token pair for a development user',
      tags: ['admin'],
      security: [ADMIN],
      body: DevTokenBody,
      responses: {
        200: { description: 'A token pair for an existing user', schema: SignInSchema },
        201: { description: 'A new development user and its token pair', schema: SignInSchema },
      },
      handler: async (ctx, { body }) => {
        const dev = await auth.devSignIn({ userId: body.user_id, externalId: body.external_id, email: body.email, name: body.name, tier: body.tier });
        return signedIn(ctx, dev);
      },
    }),
    defineRoute({
      method: 'post',
      path: '/api/v1/auth/service-token',
      operationId: 'issueServiceToken',
      summary: 'Issue a service token',
      description:
        'An ES256 JWT (subject `service:<name>`, scope `service`) that the gateway accepts wherever it accepts X-Service-Key, and that other services can verify against the JWKS without sharing a key.',
      tags: ['admin'],
      security: [ADMIN],
      body: ServiceTokenBody,
      responses: { 201: { description: 'The token', schema: ServiceTokenSchema } },
      handler: async (ctx, { body }) => {
        const issued = await auth.serviceToken(body.service, body.ttl_seconds);
        ctx.status = 201;
        ctx.set('Cache-Control', 'no-store');
        return { access_token: issued.token, token_type: 'Bearer' as const, expires_in: issued.ttl, subject: `service:${body.service}` };
      },
    }),
  ];
}
