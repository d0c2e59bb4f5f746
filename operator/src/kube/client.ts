// A thin JSON client over node:https, with the credentials @kubernetes/client-node resolves (connection.ts).
//
// Plain JSON throughout: watches deliver plain JSON, and comparing desired children against the
// informer cache needs one representation. Every request goes through `request`, which is also where
// writes are counted for the "zero writes when converged" guarantee. Objects are typed by the resource
// they are read from or written to (ResourceType<T>, object.ts).

import type { IncomingMessage } from 'node:http';
import { type RequestOptions as HttpsRequestOptions, request as httpsRequest } from 'node:https';
import type { V1ObjectMeta } from '@kubernetes/client-node';
import type { Counter } from 'prom-client';
import type { Connection } from './connection.ts';
import type { Json, KubeList, KubeObject, Status } from './object.ts';
import { collectionPath, objectPath, type ResourceType } from './resources.ts';

export const FIELD_MANAGER = 'tempora-operator';

export class KubeApiError extends Error {
  readonly statusCode: number;
  readonly reason: string;
  constructor(statusCode: number, reason: string, message: string) {
    super(message);
    this.name = 'KubeApiError';
    this.statusCode = statusCode;
    this.reason = reason;
  }
}

export function isNotFound(err: unknown): boolean {
  return err instanceof KubeApiError && err.statusCode === 404;
}

export function isConflict(err: unknown): boolean {
  return err instanceof KubeApiError && err.statusCode === 409;
}

/**
 * One event of a watch: an object of the watched resource added, changed or deleted; a bookmark (only the
 * resourceVersion to resume from, with allowWatchBookmarks); or an error, a metav1.Status (410 Gone when
 * the resourceVersion expired).
 */
export type WatchEvent<T extends KubeObject> =
  | { type: 'ADDED' | 'MODIFIED' | 'DELETED'; object: T }
  | { type: 'BOOKMARK'; object: { metadata: { resourceVersion?: string } } }
  | { type: 'ERROR'; object: Status };

export type Method = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

interface RequestOptions {
  query?: Record<string, string | undefined>;
  body?: unknown;
  contentType?: string;
  /** Labels the write counter; defaults to the last path segment that names a resource. */
  resource?: string;
}

export class KubeClient {
  readonly connection: Connection;
  readonly #writes: Counter<'verb' | 'resource'> | undefined;

  constructor(connection: Connection, writes?: Counter<'verb' | 'resource'>) {
    this.connection = connection;
    this.#writes = writes;
  }

  async request<T>(method: Method, path: string, options: RequestOptions = {}): Promise<T> {
    if (method !== 'GET' && options.query?.dryRun === undefined) {
      this.#writes?.inc({ verb: method.toLowerCase(), resource: options.resource ?? resourceFromPath(path) });
    }
    const body = options.body === undefined ? undefined : JSON.stringify(options.body);
    const headers: Record<string, string> = { accept: 'application/json' };
    if (body !== undefined) headers['content-type'] = options.contentType ?? 'application/json';
    const response = await this.#send(method, this.#url(path, options.query), headers, this.connection.agent, body);
    const chunks: Buffer[] = [];
    for await (const chunk of response) chunks.push(chunk);
    const text = Buffer.concat(chunks).toString('utf8');
    const status = response.statusCode ?? 0;
    if (status >= 400) {
      // Errors are usually a metav1.Status, but not always (a 404 for an unknown group is plain text).
      const problem = parseOr<{ reason?: string; message?: string }>(text, {});
      throw new KubeApiError(status, problem.reason ?? 'Unknown', `${method} ${path}: ${status} ${problem.message ?? text}`);
    }
    // Where a reply gets its type: the API server's contract for the path asked (the resource's schema),
    // which nothing on this side could check short of validating every object of every watch.
    const reply: T = text ? JSON.parse(text) : undefined;
    return reply;
  }

  /**
   * Streams a watch: `onEvent` for each event, until the server ends it, the signal aborts it (resolves)
   * or the connection fails (rejects). A refused watch (410 Gone, 403) rejects with its KubeApiError.
   */
  async watch<T extends KubeObject = KubeObject>(
    path: string,
    query: Record<string, string | undefined>,
    signal: AbortSignal,
    onEvent: (event: WatchEvent<T>) => void,
  ): Promise<void> {
    const response = await this.#send(
      'GET',
      this.#url(path, { ...query, watch: 'true' }),
      { accept: 'application/json' },
      this.connection.watchAgent,
      undefined,
      signal,
    );
    if ((response.statusCode ?? 0) >= 400) {
      let text = '';
      for await (const chunk of response) text += String(chunk);
      const problem = parseOr<{ reason?: string; message?: string }>(text, {});
      throw new KubeApiError(response.statusCode!, problem.reason ?? 'Unknown', `watch ${path}: ${response.statusCode} ${problem.message ?? text}`);
    }
    // One JSON event per line. Iterating the response (not readline) makes a dropped connection an error.
    response.setEncoding('utf8');
    let pending = '';
    try {
      for await (const chunk of response) {
        pending += chunk;
        for (let nl = pending.indexOf('\n'); nl >= 0; nl = pending.indexOf('\n')) {
          const line = pending.slice(0, nl);
          pending = pending.slice(nl + 1);
          if (!line) continue;
          // As in request, the API server's contract types the event: the watched resource's objects.
          const event: WatchEvent<T> = JSON.parse(line);
          onEvent(event);
        }
      }
    } catch (err) {
      if (!signal.aborted) throw err;
    }
  }

  #url(path: string, query: Record<string, string | undefined> = {}): URL {
    const url = new URL(this.connection.server + path);
    for (const [k, v] of Object.entries(query)) if (v !== undefined) url.searchParams.set(k, v);
    return url;
  }

  async #send(
    method: Method,
    url: URL,
    headers: Record<string, string>,
    agent: HttpsRequestOptions['agent'],
    body?: string,
    signal?: AbortSignal,
  ): Promise<IncomingMessage> {
    Object.assign(headers, await this.connection.headers());
    return new Promise((resolve, reject) => {
      const req = httpsRequest(url, { method, headers, agent, signal }, resolve);
      req.on('error', reject);
      req.end(body);
    });
  }

  get<T extends KubeObject>(r: ResourceType<T>, namespace: string, name: string): Promise<T> {
    return this.request('GET', objectPath(r, namespace, name));
  }

  async getOrUndefined<T extends KubeObject>(r: ResourceType<T>, namespace: string, name: string): Promise<T | undefined> {
    try {
      return await this.get(r, namespace, name);
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  /** One page of a list; the informer pages with `continue`. */
  list<T extends KubeObject>(r: ResourceType<T>, query: Record<string, string | undefined>, namespace?: string): Promise<KubeList<T>> {
    return this.request('GET', collectionPath(r, namespace), { query });
  }

  /** `body` may leave the name to the API server (metadata.generateName). */
  create<T extends KubeObject>(r: ResourceType<T>, namespace: string, body: Omit<T, 'metadata'> & { metadata: Json<V1ObjectMeta> }): Promise<T> {
    return this.request('POST', collectionPath(r, namespace), { body });
  }

  replace<T extends KubeObject>(r: ResourceType<T>, namespace: string, name: string, body: T): Promise<T> {
    return this.request('PUT', objectPath(r, namespace, name), { body });
  }

  /** Server-side apply under the operator's single field manager. */
  apply<T extends KubeObject>(r: ResourceType<T>, obj: T): Promise<T> {
    return this.request('PATCH', objectPath(r, obj.metadata.namespace ?? '', obj.metadata.name), {
      body: obj,
      contentType: 'application/apply-patch+yaml',
      // force: the operator is the declared owner of every field it sends; fields it leaves out stay
      // with whoever set them (kubectl scale, an HPA, another controller).
      query: { fieldManager: FIELD_MANAGER, force: 'true' },
    });
  }

  patchStatus<T extends KubeObject>(r: ResourceType<T>, namespace: string, name: string, status: Record<string, unknown>): Promise<T> {
    return this.request('PATCH', `${objectPath(r, namespace, name)}/status`, {
      body: { status },
      contentType: 'application/merge-patch+json',
      query: { fieldManager: FIELD_MANAGER },
      resource: `${r.plural}/status`,
    });
  }

  delete(r: ResourceType, namespace: string, name: string): Promise<unknown> {
    return this.request('DELETE', objectPath(r, namespace, name));
  }

  /**
   * True when discovery lists the API group. The aggregator lists every registered APIService's group,
   * available or not, so this tells whether an adapter is installed even while it is down.
   */
  async listsGroup(group: string): Promise<boolean> {
    const list = await this.request<{ groups?: { name: string }[] }>('GET', '/apis');
    return (list.groups ?? []).some((g) => g.name === group);
  }

  /** True when the API group/version is served, e.g. monitoring.coreos.com/v1 once its CRDs exist. */
  async serves(groupVersion: string, plural?: string): Promise<boolean> {
    try {
      const list = await this.request<{ resources?: { name: string }[] }>('GET', `/apis/${groupVersion}`);
      return plural === undefined || (list.resources ?? []).some((res) => res.name === plural);
    } catch (err) {
      if (isNotFound(err)) return false;
      throw err;
    }
  }
}

function parseOr<T>(text: string, fallback: T): T {
  try {
    // An error body is read for its reason and message, each of which may be missing.
    return JSON.parse(text);
  } catch {
    return fallback;
  }
}

function resourceFromPath(path: string): string {
  const parts = path.split('?')[0]!.split('/').filter(Boolean);
  const ns = parts.indexOf('namespaces');
  // .../namespaces/<ns>/<plural>[/<name>[/<sub>]]
  if (ns >= 0 && parts.length > ns + 2) return parts[ns + 2]!;
  const version = parts[0] === 'api' ? 1 : 2;
  return parts[version + 1] ?? 'unknown';
}
