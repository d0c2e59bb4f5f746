// A thin JSON client over @kubernetes/client-node's KubeConfig and HTTP library.
//
// Why not the typed API classes: they deserialize into model classes (Dates for timestamps, renamed
// fields), while Watch delivers plain JSON; comparing desired children against the informer cache needs
// one representation, and the dynamic KubernetesObjectApi cannot reach the status subresource. Every
// request goes through `request`, which is also where writes are counted for the "zero writes when
// converged" guarantee.
import { HttpMethod, IsomorphicFetchHttpLibrary, RequestContext, type KubeConfig } from '@kubernetes/client-node';
import type { Counter } from 'prom-client';
import type { KubeList, KubeObject } from './object.ts';
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

interface RequestOptions {
  query?: Record<string, string | undefined>;
  body?: unknown;
  contentType?: string;
  /** Labels the write counter; defaults to the last path segment that names a resource. */
  resource?: string;
}

const WRITE_METHODS = new Set<HttpMethod>([HttpMethod.POST, HttpMethod.PUT, HttpMethod.PATCH, HttpMethod.DELETE]);

export class KubeClient {
  readonly kubeConfig: KubeConfig;
  readonly #http = new IsomorphicFetchHttpLibrary();
  #dispatcher: ReturnType<RequestContext['getDispatcher']>;
  readonly #writes: Counter<'verb' | 'resource'> | undefined;

  constructor(kubeConfig: KubeConfig, writes?: Counter<'verb' | 'resource'>) {
    this.kubeConfig = kubeConfig;
    this.#writes = writes;
  }

  async request<T>(method: HttpMethod, path: string, options: RequestOptions = {}): Promise<T> {
    const cluster = this.kubeConfig.getCurrentCluster();
    if (!cluster) throw new Error('kubeconfig has no current cluster');
    const url = new URL(cluster.server.replace(/\/$/, '') + path);
    for (const [k, v] of Object.entries(options.query ?? {})) if (v !== undefined) url.searchParams.set(k, v);
    const ctx = new RequestContext(url.toString(), method);
    ctx.setHeaderParam('Accept', 'application/json');
    if (options.body !== undefined) {
      ctx.setHeaderParam('Content-Type', options.contentType ?? 'application/json');
      ctx.setBody(JSON.stringify(options.body));
    }
    // applySecurityAuthentication sets fresh credentials (tokens rotate) but also a new undici Agent each
    // time, which would open a TLS connection per request; the first Agent is kept so connections are reused.
    await this.kubeConfig.applySecurityAuthentication(ctx);
    if (this.#dispatcher) ctx.setDispatcher(this.#dispatcher);
    else this.#dispatcher = ctx.getDispatcher();
    if (WRITE_METHODS.has(method) && options.query?.dryRun === undefined) {
      this.#writes?.inc({ verb: method.toLowerCase(), resource: options.resource ?? resourceFromPath(path) });
    }
    const response = await this.#http.send(ctx).toPromise();
    const text = await response.body.text();
    if (response.httpStatusCode >= 400) {
      // Errors are usually a metav1.Status, but not always (a 404 for an unknown group is plain text).
      const status = parseOr<{ reason?: string; message?: string }>(text, {});
      throw new KubeApiError(
        response.httpStatusCode,
        status.reason ?? 'Unknown',
        `${method} ${path}: ${response.httpStatusCode} ${status.message ?? text}`,
      );
    }
    return (text ? JSON.parse(text) : undefined) as T;
  }

  get(r: ResourceType, namespace: string, name: string): Promise<KubeObject> {
    return this.request(HttpMethod.GET, objectPath(r, namespace, name));
  }

  async getOrUndefined(r: ResourceType, namespace: string, name: string): Promise<KubeObject | undefined> {
    try {
      return await this.get(r, namespace, name);
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  /** One page of a list; the informer pages with `continue`. */
  list(r: ResourceType, query: Record<string, string | undefined>, namespace?: string): Promise<KubeList> {
    return this.request(HttpMethod.GET, collectionPath(r, namespace), { query });
  }

  create(r: ResourceType, namespace: string, body: KubeObject | Record<string, unknown>): Promise<KubeObject> {
    return this.request(HttpMethod.POST, collectionPath(r, namespace), { body });
  }

  replace(r: ResourceType, namespace: string, name: string, body: KubeObject): Promise<KubeObject> {
    return this.request(HttpMethod.PUT, objectPath(r, namespace, name), { body });
  }

  /** Server-side apply under the operator's single field manager. */
  apply(r: ResourceType, obj: KubeObject): Promise<KubeObject> {
    return this.request(HttpMethod.PATCH, objectPath(r, obj.metadata.namespace ?? '', obj.metadata.name), {
      body: obj,
      contentType: 'application/apply-patch+yaml',
      // force: the operator is the declared owner of every field it sends; fields it leaves out stay
      // with whoever set them (kubectl scale, an HPA, another controller).
      query: { fieldManager: FIELD_MANAGER, force: 'true' },
    });
  }

  patchStatus(r: ResourceType, namespace: string, name: string, status: Record<string, unknown>): Promise<KubeObject> {
    return this.request(HttpMethod.PATCH, `${objectPath(r, namespace, name)}/status`, {
      body: { status },
      contentType: 'application/merge-patch+json',
      query: { fieldManager: FIELD_MANAGER },
      resource: `${r.plural}/status`,
    });
  }

  delete(r: ResourceType, namespace: string, name: string): Promise<unknown> {
    return this.request(HttpMethod.DELETE, objectPath(r, namespace, name));
  }

  /** True when the API group/version is served, e.g. monitoring.coreos.com/v1 once its CRDs exist. */
  async serves(groupVersion: string, plural?: string): Promise<boolean> {
    try {
      const list = await this.request<{ resources?: { name: string }[] }>(HttpMethod.GET, `/apis/${groupVersion}`);
      return plural === undefined || (list.resources ?? []).some((res) => res.name === plural);
    } catch (err) {
      if (isNotFound(err)) return false;
      throw err;
    }
  }
}

function parseOr<T>(text: string, fallback: T): T {
  try {
    return JSON.parse(text) as T;
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
