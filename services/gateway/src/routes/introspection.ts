import { defineRoute, Problem, type RouteDefinition, unprocessable, zodIssues } from '@tempora/kit/http';
import type { Context } from 'koa';
import { z } from 'zod';
import { SERVICE } from '../credentials.ts';
import type { GatewayRouteDeps } from './context.ts';

const IntrospectionBody = z.object({
  token: z.string().min(1).max(10_000),
  token_type_hint: z.string().max(100).optional().meta({ description: 'accepted and ignored: only access tokens are introspected' }),
});

const IntrospectionSchema = z
  .object({
    active: z.boolean(),
    token_type: z.literal('access_token').optional(),
    sub: z.string().optional(),
    jti: z.string().optional(),
    iat: z.number().int().optional(),
    exp: z.number().int().optional(),
    iss: z.string().optional(),
    aud: z.union([z.string(), z.array(z.string())]).optional(),
    scope: z.string().optional().meta({ description: '`service` on service tokens' }),
    tier: z.enum(['free', 'pro', 'enterprise']).optional().meta({ description: "the account's tier now (user tokens)" }),
  })
  .meta({ id: 'TokenIntrospection' });

const FORM_LIMIT_BYTES = 16_384;

/** RFC 7662 §2.1 sends the token form-encoded; the kit parses JSON bodies only, so a form body is read here. */
async function formBody(ctx: Context): Promise<Record<string, string>> {
  let size = 0;
  const chunks: Buffer[] = [];
  for await (const chunk of ctx.req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > FORM_LIMIT_BYTES) throw new Problem(413, 'request body exceeds the size limit');
    chunks.push(chunk);
  }
  return Object.fromEntries(new URLSearchParams(Buffer.concat(chunks).toString('utf8')));
}

/**
 * OAuth 2.0 Token Introspection (RFC 7662) for the other services: whether an access token is active now
 * (signature, issuer, audience, expiry, and the revocations a local JWKS check cannot see: sign-out,
 * sign-out of every session, account deletion). An inactive token gets `{active: false}` and nothing
 * else, whatever the reason (§2.2). Callers authenticate with their X-Service-Key.
 */
export function introspectionRoutes(deps: GatewayRouteDeps): RouteDefinition[] {
  return [
    defineRoute({
      method: 'post',
      path: '/api/v1/auth/introspect',
      operationId: 'introspectToken',
      summary: 'Whether an access token is active (RFC 7662 token introspection, for services)',
      description:
        "Body `token` (and an optional `token_type_hint`, ignored), form-encoded as RFC 7662 §2.1 has it or as JSON. Answers `{active: false}` for a token that is malformed, expired, signed by a key no longer published, revoked by a sign-out, issued before a sign-out of every session, or whose account was deleted; otherwise `active: true` with its claims and the account's tier now. Not cached: callers cache the answer briefly themselves.",
      tags: ['auth'],
      security: [SERVICE],
      responses: {
        200: { description: "The token's state", schema: IntrospectionSchema },
        422: { description: 'No token in the body' },
      },
      handler: async (ctx) => {
        const raw = ctx.is('application/x-www-form-urlencoded') ? await formBody(ctx) : (ctx.request as { body?: unknown }).body;
        const parsed = IntrospectionBody.safeParse(raw ?? {});
        if (!parsed.success) throw unprocessable('the request needs the token to introspect', zodIssues(parsed.error, 'body'));
        ctx.set('Cache-Control', 'no-store');
        return deps.auth.introspect(parsed.data.token);
      },
    }),
  ];
}
