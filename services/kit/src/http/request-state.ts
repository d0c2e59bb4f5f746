import type { Principal } from './auth.ts';
import type { AccessTokenClaims } from './jwt.ts';

/**
 * What a request carries through middlewares to its route: one shape for every service, so no handler
 * casts `ctx.state`. It is Koa's `DefaultState` (declared below), so every `Context` and `Middleware`
 * sees it without a type parameter. A service adds its own fields by merging into this interface
 * (`declare module '@tempora/kit/http' { interface RequestState { user?: ... } }`).
 */
export interface RequestState {
  /** The request's id (`X-Request-ID`), set first by the app. */
  requestId: string;
  /** Every credential presented and accepted, by scheme. */
  principals?: Map<string, Principal>;
  /** The credential the route was authorized with (or the first accepted one before authorization). */
  principal?: Principal;
  /** A present but refused credential, answered 401 only after rate limiting. */
  credentialProblem?: unknown;
  /** Verified claims of a Bearer access token (`accessTokenMiddleware`). */
  accessToken?: AccessTokenClaims;
}

declare module 'koa' {
  // eslint-disable-next-line @typescript-eslint/no-empty-object-type
  interface DefaultState extends RequestState {}
}
