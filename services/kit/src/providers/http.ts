import type { z } from 'zod';
import { ProviderError, type ProviderKind } from './types.ts';

export interface HttpCallOptions {
  provider: ProviderKind;
  url: string;
  method?: 'GET' | 'POST';
  headers?: Record<string, string>;
  /** A JSON body (serialised here) or a ready body (FormData, string). */
  json?: unknown;
  body?: FormData | string;
  /** Per attempt. */
  timeoutMs: number;
  /** Further attempts after the first, on 429, 5xx, timeouts, network errors and a 200 whose body is not JSON. */
  retries: number;
  /** First back-off; doubles each attempt, with jitter, unless the server sent Retry-After. */
  backoffMs?: number;
  /** Upper bound on any single wait, Retry-After included. */
  maxBackoffMs?: number;
  signal?: AbortSignal;
}

/** A call whose reply is JSON (the default), read with the schema of the fields the caller uses. */
type JsonCall<S extends z.ZodType> = HttpCallOptions & { expect?: 'json'; schema: S };
/** A call whose reply is kept as raw bytes. */
type BytesCall = HttpCallOptions & { expect: 'bytes' };

export interface HttpReply<T> {
  status: number;
  body: T;
  headers: Headers;
  attempts: number;
}

/** Retry-After as seconds or an HTTP date, in milliseconds; undefined when absent or unreadable. */
export function retryAfterMs(value: string | null, now = Date.now()): number | undefined {
  if (!value) return undefined;
  const trimmed = value.trim();
  if (/^\d+(\.\d+)?$/.test(trimmed)) return Math.round(Number(trimmed) * 1000);
  const date = Date.parse(trimmed);
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
}

const sleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });

const RETRYABLE_STATUS = (status: number) => status === 429 || status === 408 || status >= 500;

/**
 * One provider HTTP call with a per-attempt timeout and bounded retries. Retries 429/408/5xx (honouring
 * Retry-After), timeouts, connection failures and unparseable JSON; any other 4xx fails at once, and so
 * does JSON of another shape than the schema's (malformed, as the adapters' own checks of a reply are). The
 * caller's signal cancels the call and any wait between attempts.
 */
export function callProvider<S extends z.ZodType>(options: JsonCall<S>): Promise<HttpReply<z.output<S>>>;
export function callProvider(options: BytesCall): Promise<HttpReply<Buffer>>;
export async function callProvider(options: JsonCall<z.ZodType> | BytesCall): Promise<HttpReply<unknown>> {
  const backoff = options.backoffMs ?? 500;
  const maxBackoff = options.maxBackoffMs ?? 30_000;
  const headers: Record<string, string> = { accept: options.expect === 'bytes' ? '*/*' : 'application/json', ...options.headers };
  let body: FormData | string | undefined = options.body;
  if (options.json !== undefined) {
    headers['content-type'] = 'application/json';
    body = JSON.stringify(options.json);
  }
  let lastError: ProviderError | undefined;
  for (let attempt = 1; attempt <= options.retries + 1; attempt += 1) {
    if (options.signal?.aborted) throw new ProviderError(options.provider, 'cancelled', 'the call was cancelled', { attempts: attempt - 1 });
    const timeout = AbortSignal.timeout(options.timeoutMs);
    const signal = options.signal ? AbortSignal.any([options.signal, timeout]) : timeout;
    let waitMs: number | undefined;
    try {
      const response = await fetch(options.url, { method: options.method ?? 'POST', headers, body, signal });
      if (!response.ok) {
        const text = await response.text().catch(() => '');
        lastError = new ProviderError(options.provider, 'http', `${options.provider} answered ${response.status}: ${summarise(text)}`, {
          status: response.status,
          attempts: attempt,
        });
        if (!RETRYABLE_STATUS(response.status)) throw lastError;
        waitMs = retryAfterMs(response.headers.get('retry-after'));
      } else if (options.expect === 'bytes') {
        const bytes = Buffer.from(await response.arrayBuffer());
        return { status: response.status, body: bytes, headers: response.headers, attempts: attempt };
      } else {
        const read = readJson(options, response.status, await response.text(), attempt);
        if (read instanceof ProviderError) lastError = read;
        else return { status: response.status, body: read.value, headers: response.headers, attempts: attempt };
      }
    } catch (error) {
      if (error instanceof ProviderError) throw error;
      if (options.signal?.aborted) throw new ProviderError(options.provider, 'cancelled', 'the call was cancelled', { attempts: attempt });
      if (timeout.aborted) {
        lastError = new ProviderError(options.provider, 'timeout', `${options.provider} did not answer within ${options.timeoutMs} ms`, { attempts: attempt });
      } else {
        lastError = new ProviderError(options.provider, 'network', `${options.provider} could not be reached: ${(error as Error).message}`, {
          attempts: attempt,
        });
      }
    }
    if (attempt > options.retries) break;
    const exponential = backoff * 2 ** (attempt - 1);
    const wait = Math.min(maxBackoff, waitMs ?? exponential * (0.75 + Math.random() * 0.5));
    try {
      await sleep(wait, options.signal);
    } catch {
      throw new ProviderError(options.provider, 'cancelled', 'the call was cancelled', { attempts: attempt });
    }
  }
  throw lastError ?? new ProviderError(options.provider, 'network', `${options.provider} call failed`);
}

/**
 * A 200 reply read with the call's schema. Text that is not JSON comes back as the error, to be retried (a
 * reply cut short, a proxy's page); JSON of another shape is thrown, as asking again would get it again.
 */
function readJson(options: JsonCall<z.ZodType>, status: number, text: string, attempts: number): { value: unknown } | ProviderError {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return new ProviderError(options.provider, 'malformed', `${options.provider} sent a reply that is not JSON: ${summarise(text)}`, { status, attempts });
  }
  const parsed = options.schema.safeParse(json);
  if (parsed.success) return { value: parsed.data };
  const issue = parsed.error.issues[0]!;
  const where = issue.path.length ? issue.path.join('.') : 'the body';
  const others = parsed.error.issues.length > 1 ? ` (and ${parsed.error.issues.length - 1} more)` : '';
  throw new ProviderError(options.provider, 'malformed', `${options.provider} sent a reply of another shape: ${where}: ${issue.message}${others}`, {
    status,
    attempts,
  });
}

function summarise(text: string): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat.length > 200 ? `${flat.slice(0, 200)}…` : flat || '(empty body)';
}

/** Common settings of every network provider. */
export interface ProviderHttpSettings {
  timeoutMs: number;
  retries: number;
  backoffMs?: number;
  maxBackoffMs?: number;
}
