// A list-watch informer over client-node's Watch.
//
// client-node's ListWatch covers list, watch and relist-on-410, but it stops for good on any other error,
// has no periodic resync and keeps its resourceVersion private. The operator must keep watching through
// API server restarts (restart with backoff), resync on a timer, and count relists, so the loop is here.
import { Watch } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type { KubeClient } from './client.ts';
import type { OperatorMetrics } from '../metrics.ts';
import { objectKey, type KubeObject } from './object.ts';
import { collectionPath, type ResourceType } from './resources.ts';

export type InformerEvent = 'add' | 'update' | 'delete' | 'resync';
export type InformerHandler = (event: InformerEvent, obj: KubeObject) => void;

export interface InformerOptions {
  client: KubeClient;
  resource: ResourceType;
  metrics: OperatorMetrics;
  log: Logger;
  namespace?: string;
  labelSelector?: string;
  resyncMs?: number;
  maxBackoffMs?: number;
}

class GoneError extends Error {}

const PAGE_SIZE = '500';
const MIN_BACKOFF_MS = 250;

export class Informer {
  readonly resource: ResourceType;
  /** Where the next watch resumes; empty means "list first". Public so tests can force a 410. */
  resourceVersion = '';
  readonly #options: InformerOptions;
  readonly #watch: Watch;
  readonly #cache = new Map<string, KubeObject>();
  readonly #handlers: InformerHandler[] = [];
  #abort: AbortController | undefined;
  #stopped = true;
  #backoffMs = MIN_BACKOFF_MS;
  #resyncTimer: NodeJS.Timeout | undefined;
  #sleepTimer: { timer: NodeJS.Timeout; wake: () => void } | undefined;
  #synced = false;
  readonly #syncWaiters: (() => void)[] = [];
  #loop: Promise<void> | undefined;

  constructor(options: InformerOptions) {
    this.#options = options;
    this.resource = options.resource;
    this.#watch = new Watch(options.client.kubeConfig);
  }

  onEvent(handler: InformerHandler): void {
    this.#handlers.push(handler);
  }

  get(namespace: string | undefined, name: string): KubeObject | undefined {
    return this.#cache.get(objectKey(namespace, name));
  }

  list(): KubeObject[] {
    return [...this.#cache.values()];
  }

  get hasSynced(): boolean {
    return this.#synced;
  }

  waitForSync(): Promise<void> {
    if (this.#synced) return Promise.resolve();
    return new Promise((resolve) => this.#syncWaiters.push(resolve));
  }

  start(): void {
    if (!this.#stopped) return;
    this.#stopped = false;
    this.#loop = this.#run();
    const resyncMs = this.#options.resyncMs;
    if (resyncMs && resyncMs > 0) {
      this.#resyncTimer = setInterval(() => this.resync(), resyncMs);
      this.#resyncTimer.unref();
    }
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#resyncTimer) clearInterval(this.#resyncTimer);
    this.#abort?.abort();
    if (this.#sleepTimer) {
      clearTimeout(this.#sleepTimer.timer);
      this.#sleepTimer.wake();
    }
    await this.#loop;
  }

  /** Re-delivers every cached object, so level-triggered reconcilers see the whole state again. */
  resync(): void {
    for (const obj of this.#cache.values()) this.#emit('resync', obj);
  }

  /** Ends the current watch; the loop resumes from `resourceVersion` (or relists when it is empty). */
  restartWatch(): void {
    this.#abort?.abort();
  }

  async #run(): Promise<void> {
    const { log, metrics, resource } = this.#options;
    let listReason = 'initial';
    while (!this.#stopped) {
      try {
        if (!this.resourceVersion) {
          await this.#relist();
          metrics.informerRelists.inc({ resource: resource.plural, reason: listReason });
        }
        await this.#watchOnce();
        listReason = 'error';
      } catch (err) {
        if (this.#stopped) break;
        if (err instanceof GoneError) {
          log.info({ resource: resource.plural }, 'watch resource version expired (410); relisting');
          this.resourceVersion = '';
          listReason = 'gone';
          continue;
        }
        metrics.informerRestarts.inc({ resource: resource.plural });
        const delay = this.#backoffMs * (0.5 + Math.random() / 2);
        this.#backoffMs = Math.min(this.#backoffMs * 2, this.#options.maxBackoffMs ?? 30_000);
        log.warn({ resource: resource.plural, err: String(err), retryInMs: Math.round(delay) }, 'watch failed; retrying');
        await this.#sleep(delay);
      }
    }
  }

  async #relist(): Promise<void> {
    const { client, resource, namespace, labelSelector } = this.#options;
    const fresh = new Map<string, KubeObject>();
    let continueToken: string | undefined;
    let resourceVersion = '';
    do {
      const page = await client.list(resource, { labelSelector, limit: PAGE_SIZE, continue: continueToken }, namespace);
      for (const item of page.items) {
        // List items omit apiVersion/kind; watch events carry them. Normalise so both look alike.
        item.apiVersion ??= resource.group ? `${resource.group}/${resource.version}` : resource.version;
        item.kind ??= resource.kind;
        stripForCache(item);
        fresh.set(objectKey(item.metadata.namespace, item.metadata.name), item);
      }
      continueToken = page.metadata.continue || undefined;
      resourceVersion = page.metadata.resourceVersion ?? '';
    } while (continueToken);

    for (const [key, old] of this.#cache) {
      if (!fresh.has(key)) {
        this.#cache.delete(key);
        this.#emit('delete', old);
      }
    }
    for (const [key, obj] of fresh) {
      const old = this.#cache.get(key);
      this.#cache.set(key, obj);
      if (!old) this.#emit('add', obj);
      else if (old.metadata.resourceVersion !== obj.metadata.resourceVersion) this.#emit('update', obj);
    }
    this.resourceVersion = resourceVersion;
    this.#backoffMs = MIN_BACKOFF_MS;
    if (!this.#synced) {
      this.#synced = true;
      for (const resolve of this.#syncWaiters.splice(0)) resolve();
    }
  }

  async #watchOnce(): Promise<void> {
    const { resource, namespace, labelSelector } = this.#options;
    let gone = false;
    let serverError: Error | undefined;
    let delivered = false;
    const ended = new Promise<unknown>((resolve) => {
      const query: Record<string, string | number | boolean | undefined> = {
        resourceVersion: this.resourceVersion,
        allowWatchBookmarks: true,
        labelSelector,
        // Like client-go's reflector: the server ends each watch after a random 5-10 minutes.
        timeoutSeconds: 300 + Math.floor(Math.random() * 300),
      };
      this.#watch
        .watch(
          collectionPath(resource, namespace),
          query,
          (type: string, obj: KubeObject & { code?: number; message?: string }) => {
            if (type === 'ERROR') {
              if (obj.code === 410) gone = true;
              else serverError = new Error(`watch error ${obj.code}: ${obj.message}`);
              this.#abort?.abort();
              return;
            }
            delivered = true;
            this.#apply(type, obj);
          },
          resolve,
        )
        .then((abort) => {
          this.#abort = abort;
          if (this.#stopped) abort.abort();
        }, resolve);
    });
    const err = await ended;
    this.#abort = undefined;
    if (gone || (err as { statusCode?: number } | null)?.statusCode === 410) throw new GoneError();
    if (serverError) throw serverError;
    if (delivered) this.#backoffMs = MIN_BACKOFF_MS;
    // A client-side inactivity timeout or an aborted watch is a normal end: resume from resourceVersion.
    if (err && !isAbortOrTimeout(err)) throw err;
  }

  #apply(type: string, obj: KubeObject): void {
    const rv = obj.metadata?.resourceVersion;
    if (type === 'BOOKMARK') {
      if (rv) this.resourceVersion = rv;
      return;
    }
    stripForCache(obj);
    const key = objectKey(obj.metadata.namespace, obj.metadata.name);
    if (type === 'DELETED') {
      this.#cache.delete(key);
      this.#emit('delete', obj);
    } else {
      const existed = this.#cache.has(key);
      this.#cache.set(key, obj);
      this.#emit(existed ? 'update' : 'add', obj);
    }
    if (rv) this.resourceVersion = rv;
  }

  #emit(event: InformerEvent, obj: KubeObject): void {
    for (const handler of this.#handlers) handler(event, obj);
  }

  #sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.#sleepTimer = undefined;
        resolve();
      }, ms);
      this.#sleepTimer = { timer, wake: resolve };
    });
  }
}

/**
 * managedFields are often the largest part of an object and the operator never reads them from the
 * cache (like client-go's TransformStripManagedFields); dropping them keeps memory flat with many objects.
 */
function stripForCache(obj: KubeObject): void {
  delete obj.metadata.managedFields;
}

function isAbortOrTimeout(err: unknown): boolean {
  const name = (err as { name?: string } | null)?.name;
  return name === 'AbortError' || name === 'TimeoutError';
}
