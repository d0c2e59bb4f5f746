import type { Context } from 'koa';
import { type Authenticator, unauthorized } from '@tempora/kit/http';
import type { Generator } from '../generator.ts';
import type { GenerationRepository } from '../repository.ts';
import type { ProviderSet } from '../providers.ts';

export interface RouteDeps {
  generator: Generator;
  repository: GenerationRepository;
  version: string;
  heartbeatMs: number;
  providers: ProviderSet;
  permissiveTextModel: string;
  /** SERVICE_KEY: the keys a priced operation from the gateway is signed with (requirePricedAs). */
  serviceKeys: readonly string[];
}

const USER_ID = /^[A-Za-z0-9._:@|+-]{1,128}$/;
const CHALLENGE = 'ApiKey header="X-User-ID"';

/**
 * The end user as the gateway names them in X-User-ID (the generation service does not re-authenticate:
 * platform-interface.md, Authentication rule 2). The header is believed only beside a valid X-Service-Key,
 * which the gateway sends with it: anyone who reaches the service directly could otherwise act as any user
 * (docs/reliability.md, "Who gets in"). A malformed value is refused with 401.
 */
export function userHeaderAuth(serviceKey: Authenticator): Authenticator {
  return {
    scheme: 'UserId',
    challenge: CHALLENGE,
    authenticate(ctx) {
      const value = ctx.get('X-User-ID');
      if (!value) return undefined;
      if (!serviceKey.authenticate(ctx)) throw unauthorized('X-User-ID is accepted only with X-Service-Key (the gateway sends both)', serviceKey.challenge);
      if (!USER_ID.test(value)) throw unauthorized('X-User-ID must be 1 to 128 characters of letters, digits and ._:@|+-', CHALLENGE);
      return { kind: 'user', id: value };
    },
  };
}

/** The X-User-ID of the request, if any (whatever other credential came with it). */
export function userOf(ctx: Context): string | null {
  return ctx.state.principals?.get('UserId')?.id ?? null;
}

/**
 * A service acting as itself: a service key without X-User-ID. The gateway sends its key with every
 * signed-in user's request, so key and X-User-ID together are that user, never a service-level caller.
 */
export function isService(ctx: Context): boolean {
  return Boolean(ctx.state.principals?.get('ServiceKey')) && !userOf(ctx);
}
