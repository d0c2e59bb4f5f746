import type { Middleware } from 'koa';
import { badRequest } from './errors.ts';

/** The credential fields a service reads, in the case they are named to clients. */
const CREDENTIAL_FIELDS = ['Authorization', 'X-API-Key', 'X-Service-Key', 'X-Admin-Key'];

/**
 * Refuses a request that repeats a credential field. Node keeps only the first Authorization of a
 * request and joins repeated X-API-Keys with a comma, while a proxy or another reader may take the
 * last: which credential a request carries must not depend on who reads it.
 */
export const refuseRepeatedCredentials: Middleware = async (ctx, next) => {
  const distinct = ctx.req.headersDistinct;
  for (const field of CREDENTIAL_FIELDS) {
    if ((distinct[field.toLowerCase()]?.length ?? 0) > 1) throw badRequest(`more than one ${field} header`);
  }
  await next();
};
