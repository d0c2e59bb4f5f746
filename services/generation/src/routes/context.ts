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
}

const USER_ID = /^[A-Za-z0-9._:@|+-]{1,128}$/;
const CHALLENGE = 'ApiKey header="X-User-ID"';

/**
 * The end user as the gateway names them in X-User-ID (the generation service does not re-authenticate:
 * platform-interface.md, Authentication rule 2). A malformed value is refused with 401.
 */
export const userHeaderAuth: Authenticator = {
  scheme: 'UserId',
  challenge: CHALLENGE,
  authenticate(ctx) {
    const value = ctx.get('X-User-ID');
    if (!value) return undefined;
    if (!USER_ID.test(value)) throw unauthorized('X-User-ID must be 1 to 128 characters of letters, digits and ._:@|+-', CHALLENGE);
    return { kind: 'user', id: value };
  },
};

/** The X-User-ID of the request, if any (whatever other credential came with it). */
export function userOf(ctx: Context): string | null {
  return ctx.state.principals?.get('UserId')?.id ?? null;
}

export function isService(ctx: Context): boolean {
  return Boolean(ctx.state.principals?.get('ServiceKey'));
}
