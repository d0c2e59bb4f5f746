/**
 * The gateway's fields of a request's state, merged into the kit's `RequestState` (and so into every Koa
 * `Context` of the gateway): set by the credential middleware, read by routes, the rate limiter and the proxy.
 */

import type { UserPrincipal } from './credentials.ts';
import type { AccessClaims } from './domain/tokens.ts';

declare module '@tempora/kit/http' {
  interface RequestState {
    /** The signed-in user, by access token or API key; absent for anonymous, service and admin callers. */
    user?: UserPrincipal;
    /** A still-valid access token of an account already deleted: its id (`DELETE /auth/me` is idempotent). */
    deletedUserId?: string;
    /** koa-jwt's verified claims (its `key` option) and the reason it refused a token. */
    jwt?: AccessClaims;
    jwtOriginalError?: Error;
  }
}
