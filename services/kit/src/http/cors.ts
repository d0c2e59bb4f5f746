import cors from '@koa/cors';
import type { Context } from 'koa';

/** True when `origin` is https?://domain or a subdomain of it, on any port. */
export function isAllowedOrigin(origin: string, domain: string | undefined): boolean {
  if (!domain || !origin) return false;
  let url: URL;
  try {
    url = new URL(origin);
  } catch {
    return false;
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') return false;
  const host = url.hostname.toLowerCase();
  const base = domain.toLowerCase().replace(/^\.+/, '');
  return host === base || host.endsWith(`.${base}`);
}

/** CORS for the configured domain and its subdomains; any other origin gets no CORS headers at all. */
export function corsForDomain(domain: string | undefined) {
  return cors({
    origin: (ctx: Context) => {
      const origin = ctx.get('Origin');
      return isAllowedOrigin(origin, domain) ? origin : '';
    },
    credentials: true,
    allowHeaders: ['Authorization', 'Content-Type', 'X-API-Key', 'X-Request-ID', 'traceparent', 'tracestate', 'Idempotency-Key'],
    // Location and Idempotent-Replayed: a browser client reads where its job or run is, and whether a retry replayed it.
    exposeHeaders: [
      'X-Request-ID',
      'X-RateLimit-Limit',
      'X-RateLimit-Remaining',
      'X-RateLimit-Reset',
      'Retry-After',
      'X-Credits-Charged',
      'X-Balance-After',
      'Location',
      'Idempotent-Replayed',
    ],
    maxAge: 600,
  });
}
