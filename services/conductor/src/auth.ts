import { CALLER_SCHEMES, requireUser, type UserCaller } from '@tempora/kit/http';
import type { Context } from 'koa';

/** Security scheme names (the kit's, docs/reliability.md "Who gets in"). */
export const BEARER = CALLER_SCHEMES.bearer;
export const SERVICE = CALLER_SCHEMES.service;

/** The user a conductor request acts for. */
export type Caller = UserCaller;

/**
 * The caller of a user operation. The conductor acts only for a user (their access token, or X-User-ID
 * beside a service credential): a service acting as itself gets 403.
 */
export function requireCaller(ctx: Context): Caller {
  return requireUser(ctx, "the conductor acts for a user: send the user's access token, or X-User-ID with a service credential");
}
