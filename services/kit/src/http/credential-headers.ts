import type { IncomingMessage } from 'node:http';
import type { Middleware } from 'koa';
import { badRequest } from './errors.ts';

/** The credential fields a service reads, lower-case (as in rawHeaders once lowered), and as named to clients. */
const CREDENTIAL_FIELDS = new Map([
  ['authorization', 'Authorization'],
  ['x-api-key', 'X-API-Key'],
  ['x-service-key', 'X-Service-Key'],
  ['x-admin-key', 'X-Admin-Key'],
]);

/**
 * The credential field a request repeats, or undefined. Node keeps only the first Authorization of a
 * request and joins repeated X-API-Keys with a comma, while a proxy or another reader may take the last:
 * which credential a request carries must not depend on who reads it. One scan of the raw fields, so the
 * gateway's express lane asks the same question as every service's middleware, at the cost of a loop.
 */
export function repeatedCredential(req: IncomingMessage): string | undefined {
  const raw = req.rawHeaders;
  const seen = new Set<string>();
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!.toLowerCase();
    if (!CREDENTIAL_FIELDS.has(name)) continue;
    if (seen.has(name)) return CREDENTIAL_FIELDS.get(name);
    seen.add(name);
  }
  return undefined;
}

/** Refuses a request that repeats a credential field (400). */
export const refuseRepeatedCredentials: Middleware = async (ctx, next) => {
  const repeated = repeatedCredential(ctx.req);
  if (repeated) throw badRequest(`more than one ${repeated} header`);
  await next();
};
