import type { IncomingMessage, ServerResponse } from 'node:http';
import {
  type Admission,
  type ExpressLane,
  Problem,
  type RateLimiter,
  type RateWindow,
  repeatedCredential,
  requestIdFor,
  sendProblem,
  toProblem,
  unexpectedProblem,
} from '@tempora/kit/http';
import type { Logger, Metrics } from '@tempora/kit/observability';
import type { Authentication, UserPrincipal } from '../credentials.ts';
import type { AccessKind } from '../domain/limits.ts';
import type { GatewayMetrics } from '../metrics.ts';
import { accessKind } from '../rate-limiting.ts';
import { decide } from './decision.ts';
import { headerValue } from './header-contract.ts';
import type { Proxy } from './proxy.ts';
import { isCanonicalTarget } from './request-target.ts';
import { PROXY_ROUTE } from './routing.ts';

export interface ExpressLaneDeps {
  authentication: Authentication;
  limiter: RateLimiter;
  windows: (user: UserPrincipal, kind: AccessKind) => RateWindow[];
  onLimited: (refusedBy: string, user: UserPrincipal) => void;
  proxy: Proxy;
  metrics: Metrics;
  gatewayMetrics: GatewayMetrics;
  logger: Logger;
}

/**
 * The proxy's express lane. Most proxied traffic is a client repeating calls with one credential, and for
 * such a call what the Koa app would work out is already known: the credential was checked within the
 * last AUTH_CACHE_MS and there is nothing to charge. The lane forwards it straight from the HTTP server,
 * without Koa's context and middleware chain, which cost about as much CPU as the proxying itself
 * (docs/gateway.md). Anything else (a credential not seen lately or refused, CORS, a chargeable call,
 * service credentials, a target not in canonical form) returns false and goes through the Koa app, which
 * applies every rule (request-target.ts canonicalises the target first): the lane
 * only takes requests it answers exactly as the app would, headers included.
 */
export function expressLane(deps: ExpressLaneDeps): ExpressLane {
  // The authentication keeps one principal per credential while it is fresh, so its windows are worked out
  // once (with the kept principals, part of what took the lane from 110 to 58–68 µs of CPU per request).
  const windowsOf = new WeakMap<UserPrincipal, Partial<Record<AccessKind, RateWindow[]>>>();
  const windowsFor = (user: UserPrincipal, kind: AccessKind) => {
    let byKind = windowsOf.get(user);
    if (!byKind) windowsOf.set(user, (byKind = {}));
    return (byKind[kind] ??= deps.windows(user, kind));
  };
  return (req: IncomingMessage, res: ServerResponse): boolean => {
    const url = req.url ?? '';
    const method = req.method ?? '';
    const headers = req.headers;
    if (
      !isCanonicalTarget(url) ||
      method === 'OPTIONS' ||
      headers.origin !== undefined ||
      headers['x-service-key'] !== undefined ||
      headers['x-admin-key'] !== undefined
    )
      return false;
    // The app refuses a repeated credential field (400, the kit's one check), so the lane leaves it.
    if (repeatedCredential(req) !== undefined) return false;
    const user = deps.authentication.cachedUser(headerValue(headers.authorization), headerValue(headers['x-api-key']), req.socket);
    if (!user) return false;
    const queryAt = url.indexOf('?');
    const path = queryAt < 0 ? url : url.slice(0, queryAt);
    // What the Koa app would refuse (an API key without the method's scope) is left to it, to refuse in its words.
    const forwarding = decide(method, path, user, false);
    if (forwarding === undefined || forwarding instanceof Problem || forwarding.chargeable) return false;
    const { upstream } = forwarding;

    const started = performance.now();
    const requestId = requestIdFor(headerValue(headers['x-request-id']));
    // The fields the Koa app would set (request id, CORS's Vary, the rate-limit state), kept as a list for
    // the proxy's single writeHead rather than set one by one.
    const responseFields = ['X-Request-ID', requestId, 'Vary', 'Origin'];
    deps.gatewayMetrics.expressLane.inc();
    const finish = (status: number) =>
      deps.metrics.httpDuration.series(method, PROXY_ROUTE[upstream], String(status)).observe((performance.now() - started) / 1000);
    const fail = (error: unknown) => {
      let problem = toProblem(error);
      if (!problem) {
        deps.logger.error({ err: error, requestId, path }, 'unhandled error');
        problem = unexpectedProblem();
      }
      if (!res.headersSent) for (let i = 0; i < responseFields.length; i += 2) res.setHeader(responseFields[i]!, responseFields[i + 1]!);
      sendProblem(res, problem, path);
      finish(problem.status);
    };
    const windows = windowsFor(user, accessKind(method, path));
    const proceed = ({ headers: limits, refusal, refusedBy }: Admission) => {
      for (const name in limits) responseFields.push(name, limits[name]!);
      if (refusal) {
        deps.onLimited(refusedBy!, user);
        return fail(refusal);
      }
      const request = { req, res, method, path, querystring: queryAt < 0 ? '' : url.slice(queryAt + 1), requestId, responseFields };
      deps.proxy.pass(request, forwarding, (error) => (error === undefined ? finish(res.statusCode) : fail(error)));
    };
    const admission = deps.limiter.admit(windows);
    if (admission instanceof Promise) admission.then(proceed, fail);
    else proceed(admission);
    return true;
  };
}
