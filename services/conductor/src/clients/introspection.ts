import { Problem, ServiceClient } from '@tempora/kit/http';
import { Reuse } from './reuse.ts';

export interface TokenState {
  active: boolean;
  /** The account's tier now (user tokens). */
  tier?: 'free' | 'pro' | 'enterprise';
}

/** Whether a token whose signature already verified is still active; throws a 503 problem when that cannot be known. */
export type Introspector = (token: string, jti: string, exp: number) => Promise<TokenState>;

export interface IntrospectionOptions {
  /** How long an answer is reused (never past the token's expiry): a revoked token works here at most this long after. */
  cacheMs: number;
  timeoutMs: number;
}

/**
 * RFC 7662 token introspection at the gateway (`POST /api/v1/auth/introspect`, `token` in a JSON body, which the gateway takes beside the RFC's form encoding, with
 * the conductor's X-Service-Key). Answers are kept by token id for `cacheMs`, and concurrent checks of one
 * token share a call. When the gateway cannot answer, the token is not accepted (503): a signed-out token
 * must not pass because the check was unavailable.
 */
export function gatewayIntrospector(gatewayUrl: string, serviceKey: string | undefined, options: IntrospectionOptions): Introspector {
  const service = new ServiceClient(gatewayUrl, serviceKey, options.timeoutMs);
  const answers = new Reuse<TokenState>();
  const ask = async (token: string): Promise<TokenState> => {
    let reply;
    try {
      reply = await service.call('POST', '/api/v1/auth/introspect', {
        requestId: `introspect-${Date.now()}`,
        json: { token, token_type_hint: 'access_token' },
      });
    } catch {
      throw new Problem(503, 'the gateway could not be reached to check the access token; try again shortly');
    }
    if (reply.status !== 200) throw new Problem(503, `the gateway answered ${reply.status} when asked to check the access token; try again shortly`);
    const body = JSON.parse(reply.text) as { active?: unknown; tier?: unknown };
    const tier = body.tier === 'free' || body.tier === 'pro' || body.tier === 'enterprise' ? body.tier : undefined;
    return { active: body.active === true, ...(tier ? { tier } : {}) };
  };
  return (token, jti, exp) => answers.get(jti, Math.min(Date.now() + options.cacheMs, exp * 1000), () => ask(token));
}
