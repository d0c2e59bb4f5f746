// A list-watch informer, as client-go's reflector: list (paged), then watch from the list's
// resourceVersion; relist on 410 Gone; restart with backoff on any other error (API server restarts);
// resync on a timer; count relists.
import type { Logger } from 'pino';
import { type OperatorMetrics, RELIST_REASONS, zeroed } from '../metrics.ts';
import { KubeApiError, type KubeClient, type WatchEvent } from './client.ts';
import { type KubeObject, objectKey } from './object.ts';
import { collectionPath, type ResourceType } from './resources.ts';

export type InformerEvent = 'add' | 'update' | 'delete' | 'resync';
export type InformerHandler<T extends KubeObject = KubeObject> = (event: InformerEvent, obj: T) => void;

export interface InformerOptions<T extends KubeObject> {
  client: KubeClient;
  resource: ResourceType<T>;
  metrics: OperatorMetrics;
  log: Logger;
  namespace?: string;
  labelSelector?: string;
  resyncMs?: number;
  maxBackoffMs?: number;
  /** What the cache keeps of each object; by default all of it but managedFields. */
  transform?: (obj: T) => T;
  /**
   * The uid an object is indexed under for controlledBy(); by default its controlling owner's. Pods are
   * controlled by ReplicaSets and Jobs, so the pod informer indexes them by their custom resource's uid.
   */
  indexUid?: (obj: T) => string | undefined;
}

/**
 * An informer of any kind as a holder of several sees it (the operator's, the children's by plural): its
 * public side, where the object type is only read, so an Informer<Pod> is one.
 */
export type AnyInformer = Pick<Informer, keyof Informer>;

class GoneError extends Error {}

const PAGE_SIZE = '500';
const MIN_BACKOFF_MS = 250;

export class Informer<T extends KubeObject = KubeObject> {
  readonly resource: ResourceType<T>;
  /** Where the next watch resumes; empty means "list first". Public so tests can force a 410. */
  resourceVersion = '';
  readonly #options: InformerOptions<T>;
  readonly #cache = new Map<string, T>();
  /** Keys by the uid of their controlling owner (or indexUid's), so that an owner finds its children without a scan. */
  readonly #byController = new Map<string, Set<string>>();
  readonly #handlers: InformerHandler<T>[] = [];
  #abort: AbortController | undefined;
  #stopped = true;
  #backoffMs = MIN_BACKOFF_MS;
  #resyncTimer: NodeJS.Timeout | undefined;
  #sleepTimer: { timer: NodeJS.Timeout; wake: () => void } | undefined;
  #synced = false;
  readonly #syncWaiters: (() => void)[] = [];
  #loop: Promise<void> | undefined;

  constructor(options: InformerOptions<T>) {
    this.#options = options;
    this.resource = options.resource;
    const resource = options.resource.plural;
    zeroed(options.metrics.informerRelists, { resource: [resource], reason: RELIST_REASONS });
    zeroed(options.metrics.informerRestarts, { resource: [resource] });
  }

  onEvent(handler: InformerHandler<T>): void {
    this.#handlers.push(handler);
  }

  get(namespace: string | undefined, name: string): T | undefined {
    return this.#cache.get(objectKey(namespace, name));
  }

  list(): T[] {
    return [...this.#cache.values()];
  }

  /** The cached objects whose controller owner reference (or indexUid) has this uid. */
  controlledBy(uid: string): T[] {
    return [...(this.#byController.get(uid) ?? [])].map((key) => this.#cache.get(key)!);
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
    let listReason: (typeof RELIST_REASONS)[number] = 'initial';
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
    const fresh = new Map<string, T>();
    let continueToken: string | undefined;
    let resourceVersion = '';
    do {
      const page = await client.list(resource, { labelSelector, limit: PAGE_SIZE, continue: continueToken }, namespace);
      for (const item of page.items) {
        // List items omit apiVersion/kind; watch events carry them. Normalise so both look alike.
        item.apiVersion ??= resource.group ? `${resource.group}/${resource.version}` : resource.version;
        item.kind ??= resource.kind;
        fresh.set(objectKey(item.metadata.namespace, item.metadata.name), this.#transform(item));
      }
      continueToken = page.metadata.continue || undefined;
      resourceVersion = page.metadata.resourceVersion ?? '';
    } while (continueToken);

    for (const [key, old] of this.#cache) {
      if (!fresh.has(key)) {
        this.#delete(key);
        this.#emit('delete', old);
      }
    }
    for (const [key, obj] of fresh) {
      const old = this.#cache.get(key);
      this.#set(key, obj);
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
    const { client, resource, namespace, labelSelector } = this.#options;
    const abort = new AbortController();
    this.#abort = abort;
    if (this.#stopped) abort.abort();
    let gone = false;
    let serverError: Error | undefined;
    let delivered = false;
    const query = {
      resourceVersion: this.resourceVersion,
      allowWatchBookmarks: 'true',
      labelSelector,
      // Like client-go's reflector: the server ends each watch after a random 5-10 minutes.
      timeoutSeconds: String(300 + Math.floor(Math.random() * 300)),
    };
    try {
      await client.watch<T>(collectionPath(resource, namespace), query, abort.signal, (event) => {
        if (event.type === 'ERROR') {
          const status = event.object;
          if (status.code === 410) gone = true;
          else serverError = new Error(`watch error ${status.code}: ${status.message}`);
          abort.abort();
          return;
        }
        delivered = true;
        this.#apply(event);
      });
    } catch (err) {
      if (err instanceof KubeApiError && err.statusCode === 410) gone = true;
      // An aborted watch (stop, restartWatch) is a normal end: resume from resourceVersion.
      else if (!abort.signal.aborted) throw err;
    } finally {
      this.#abort = undefined;
    }
    if (gone) throw new GoneError();
    if (serverError) throw serverError;
    if (delivered) this.#backoffMs = MIN_BACKOFF_MS;
  }

  #apply(event: Exclude<WatchEvent<T>, { type: 'ERROR' }>): void {
    const rv = event.object.metadata?.resourceVersion;
    if (event.type === 'BOOKMARK') {
      if (rv) this.resourceVersion = rv;
      return;
    }
    const obj = this.#transform(event.object);
    const key = objectKey(obj.metadata.namespace, obj.metadata.name);
    if (event.type === 'DELETED') {
      this.#delete(key);
      this.#emit('delete', obj);
    } else {
      const existed = this.#cache.has(key);
      this.#set(key, obj);
      this.#emit(existed ? 'update' : 'add', obj);
    }
    if (rv) this.resourceVersion = rv;
  }

  #set(key: string, obj: T): void {
    this.#unindex(key);
    this.#cache.set(key, obj);
    const uid = this.#indexUid(obj);
    if (uid === undefined) return;
    let keys = this.#byController.get(uid);
    if (!keys) this.#byController.set(uid, (keys = new Set()));
    keys.add(key);
  }

  #delete(key: string): void {
    this.#unindex(key);
    this.#cache.delete(key);
  }

  #unindex(key: string): void {
    const old = this.#cache.get(key);
    const uid = old && this.#indexUid(old);
    if (uid === undefined) return;
    const keys = this.#byController.get(uid);
    keys?.delete(key);
    if (keys?.size === 0) this.#byController.delete(uid);
  }

  #indexUid(obj: T): string | undefined {
    return (this.#options.indexUid ?? controllerUid)(obj);
  }

  #transform(obj: T): T {
    return (this.#options.transform ?? stripManagedFields)(obj);
  }

  #emit(event: InformerEvent, obj: T): void {
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
function stripManagedFields<T extends KubeObject>(obj: T): T {
  delete obj.metadata.managedFields;
  return obj;
}

function controllerUid(obj: KubeObject): string | undefined {
  return obj.metadata.ownerReferences?.find((r) => r.controller)?.uid;
}
