/**
 * The one reading of a request target (docs/gateway.md, "One reading of every request"). The gateway
 * routes, prices, rate-limits and forwards on the canonical form alone, so that what it charged for is
 * what the upstream's (strict, case-sensitive) router runs: a spelling the services would read as another
 * route can no longer slip past the price table.
 */

import { Problem } from '@tempora/kit/http';
import type { Middleware } from 'koa';

export interface RequestTarget {
  /** The canonical path: no dot segments, no empty segments, unreserved characters unescaped. */
  path: string;
  /** The query as sent, without its '?' ('' when none). */
  query: string;
}

/**
 * RFC 3986 pchar (unreserved, sub-delims, ':' and '@') plus '%' for escapes: what a path segment may
 * hold. Anything else (a fragment's '#', a space, a raw non-ASCII byte) is not a request target.
 */
const PCHAR = /^[A-Za-z0-9\-._~!$&'()*+,;=:@%]*$/;
/** A target that is already canonical: every segment non-empty, no dot segment, no escape to normalise. */
const CANONICAL = /^(?:\/(?!\.\.?(?:\/|\?|$))[A-Za-z0-9\-._~!$&'()*+,;=:@]+)+(?:\?[^#]*)?$|^\/(?:\?[^#]*)?$/;
const ESCAPE = /%([0-9A-Fa-f]{2})/g;
const UNRESERVED = /^[A-Za-z0-9\-._~]$/;

const refuse = (detail: string) => new Problem(400, detail, { title: 'Bad request target', type: 'https://tempora.dev/problems/bad-request-target' });

/**
 * One path segment in canonical form (RFC 3986 §6.2.2): percent-encoded unreserved characters decoded,
 * other escapes in upper case. Throws the refusal for a character or escape no segment may hold.
 */
function canonicalSegment(segment: string): string {
  if (!PCHAR.test(segment)) throw refuse('the request target holds a character a URL path may not (a space, a raw non-ASCII byte, or a fragment\'s "#")');
  if (!segment.includes('%')) return segment;
  if (/%(?![0-9A-Fa-f]{2})/.test(segment)) throw refuse('the request target holds a "%" that does not start a percent-encoded byte');
  return segment.replace(ESCAPE, (_escape, hex: string) => {
    const character = String.fromCharCode(Number.parseInt(hex, 16));
    return UNRESERVED.test(character) ? character : `%${hex.toUpperCase()}`;
  });
}

/**
 * The canonical form of an origin-form request target (`req.url`), or the 400 problem refusing it: dot
 * segments removed (RFC 3986 §5.2.4, never above the root), empty segments dropped (a trailing '/'
 * included), escapes normalised. Case is kept: the services declare their routes in lower case and match
 * them exactly, so `/api/v1/Timepoints/…` names no route anywhere. A fragment is refused, not dropped:
 * no client sends one (RFC 9112 §3.2.1 has no place for it), so one is a probe of the readers' differences.
 */
export function canonicalTarget(url: string): RequestTarget | Problem {
  if (CANONICAL.test(url)) {
    const at = url.indexOf('?');
    return at < 0 ? { path: url, query: '' } : { path: url.slice(0, at), query: url.slice(at + 1) };
  }
  if (url[0] !== '/') return refuse('the request target must be a path beginning with "/" (origin-form)');
  if (url.includes('#')) return refuse('the request target holds a fragment ("#"), which HTTP requests never carry');
  const at = url.indexOf('?');
  const rawPath = at < 0 ? url : url.slice(0, at);
  const segments: string[] = [];
  try {
    for (const raw of rawPath.split('/')) {
      const segment = canonicalSegment(raw);
      if (segment === '' || segment === '.') continue;
      if (segment === '..') segments.pop();
      else segments.push(segment);
    }
  } catch (error) {
    if (error instanceof Problem) return error;
    throw error;
  }
  return { path: `/${segments.join('/')}`, query: at < 0 ? '' : url.slice(at + 1) };
}

/** The target as a request line carries it. */
export const targetUrl = (target: RequestTarget) => (target.query ? `${target.path}?${target.query}` : target.path);

/** Whether a target is already in canonical form (the express lane takes no other). */
export const isCanonicalTarget = (url: string) => CANONICAL.test(url);

/**
 * The Koa app's first reading: the canonical target replaces the one sent, so routing, limits, pricing and
 * the upstream see that alone, or the request is refused before anything else runs.
 */
export const canonicalRequestTarget: Middleware = async (ctx, next) => {
  if (!isCanonicalTarget(ctx.url)) {
    const target = canonicalTarget(ctx.url);
    if (target instanceof Problem) throw target;
    ctx.url = targetUrl(target);
  }
  await next();
};
