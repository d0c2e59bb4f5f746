import { retryAfterSeconds } from './problems.ts';

export interface RetryPolicy {
  /** Tries in all, the first included. */
  attempts: number;
  /** A Retry-After longer than this is not waited for: the answer (a 429 or 503 problem) is returned instead. */
  maxWaitSeconds: number;
  /** The wait before the second try when the server names none; doubled for each further try. */
  backoffMs: number;
}

export const DEFAULT_RETRY: RetryPolicy = { attempts: 3, maxWaitSeconds: 30, backoffMs: 250 };

const IDEMPOTENT_METHODS = new Set(['GET', 'HEAD', 'PUT', 'DELETE', 'OPTIONS']);
const RETRIED_STATUSES = new Set([408, 429, 502, 503, 504]);

/** Safe to send twice: an idempotent method, or a request whose Idempotency-Key makes the server answer a repeat with the first outcome. */
export function retriable(request: Request): boolean {
  return IDEMPOTENT_METHODS.has(request.method) || request.headers.has('idempotency-key');
}

/** A wait that ends early, with the signal's reason, when the request is aborted: a caller's deadline holds through back-offs too. */
function sleep(ms: number, signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise((resolve, reject) => {
    const done = () => {
      clearTimeout(timer);
      reject(signal.reason);
    };
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', done);
      resolve();
    }, ms);
    signal.addEventListener('abort', done, { once: true });
  });
}

/**
 * A fetch that sends a retriable request again (the same bytes, so the same Idempotency-Key) after a
 * network failure or a 408/429/502/503/504, waiting what Retry-After says (seconds or an HTTP date) or
 * backing off when it says nothing. Anything else is sent once.
 */
export function retryingFetch(send: (request: Request) => Promise<Response>, policy: RetryPolicy): (request: Request) => Promise<Response> {
  return async (request) => {
    const attempts = retriable(request) ? Math.max(1, policy.attempts) : 1;
    for (let attempt = 1; ; attempt++) {
      const last = attempt >= attempts;
      let response: Response;
      try {
        response = await send(last ? request : request.clone());
      } catch (error) {
        if (last || request.signal.aborted) throw error;
        await sleep(policy.backoffMs * 2 ** (attempt - 1), request.signal);
        continue;
      }
      if (last || !RETRIED_STATUSES.has(response.status)) return response;
      const wait = retryAfterSeconds(response.headers.get('retry-after'));
      if (wait !== undefined && wait > policy.maxWaitSeconds) return response;
      await response.body?.cancel();
      await sleep(wait !== undefined ? wait * 1000 : policy.backoffMs * 2 ** (attempt - 1), request.signal);
    }
  };
}
