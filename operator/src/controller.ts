// One controller per custom resource kind: keys from its informer (and from its children's informers,
// through owner references) go into a work queue; workers take keys and run the kind's reconcile.
// Workers run only while this instance leads; informers run always, so a standby's caches are warm.
import { SpanStatusCode, trace } from '@opentelemetry/api';
import type { Logger } from 'pino';
import type { AnyInformer } from './kube/informer.ts';
import { type KubeObject, objectKey, splitKey } from './kube/object.ts';
import type { ResourceType } from './kube/resources.ts';
import { WorkQueue } from './kube/workqueue.ts';
import { type OperatorMetrics, zeroController } from './metrics.ts';
import type { ReconcileContext, Reconciler } from './reconcilers/context.ts';

const tracer = trace.getTracer('@tempora/operator');
/** How long a child's event waits for its siblings' before its owner is reconciled. */
const CHILD_EVENT_WINDOW_MS = 200;

/** `reconciler` reconciles the objects of `informer`: Operator pairs them by type. */
export interface ControllerOptions {
  reconciler: Reconciler;
  informer: AnyInformer;
  context: ReconcileContext;
  metrics: OperatorMetrics;
  log: Logger;
  workers: number;
}

export class Controller {
  readonly name: string;
  readonly resource: ResourceType;
  queue: WorkQueue;
  readonly #o: ControllerOptions;
  #workers: Promise<void>[] = [];

  constructor(options: ControllerOptions) {
    this.#o = options;
    this.resource = options.reconciler.resource;
    this.name = this.resource.kind.toLowerCase();
    this.queue = new WorkQueue({ name: this.name, metrics: options.metrics });
    // Every series of the controller and its queue exists from the start at 0, as controller-runtime's do,
    // so rate() and the dashboards see "no errors" rather than no data. Here, not in WorkQueue: the queue is
    // made anew after a lost leadership, and zeroing a histogram again would empty it.
    zeroController(options.metrics, this.name);
    options.informer.onEvent((event, obj) => {
      if (event === 'delete') options.context.heldStatus.delete(obj.metadata.uid ?? '');
      this.queue.add(objectKey(obj.metadata.namespace, obj.metadata.name));
    });
  }

  /** Enqueues every known object: used on becoming leader and by a full resync. */
  enqueueAll(): void {
    for (const obj of this.#o.informer.list()) this.queue.add(objectKey(obj.metadata.namespace, obj.metadata.name));
  }

  /** Maps a child's event to its owner's key when this controller's kind controls it. */
  enqueueOwnerOf(child: KubeObject): void {
    for (const ref of child.metadata.ownerReferences ?? []) {
      if (ref.controller && ref.kind === this.resource.kind && ref.apiVersion.startsWith(`${this.resource.group}/`)) {
        this.enqueue(child.metadata.namespace, ref.name);
      }
    }
  }

  /** Reconciles an object of this kind soon, folded with other events in the same window (a change it depends on). */
  enqueue(namespace: string | undefined, name: string): void {
    this.queue.addCoalesced(objectKey(namespace, name), CHILD_EVENT_WINDOW_MS);
  }

  /** Maps an object this kind's workloads made but do not own (a pod) to its owner, by the `tempora.dev/<kind>` label. */
  enqueueLabelled(obj: KubeObject): void {
    const name = obj.metadata.labels?.[`tempora.dev/${this.resource.kind.toLowerCase()}`];
    if (name) this.enqueue(obj.metadata.namespace, name);
  }

  startWorkers(): void {
    // A queue that was shut down (leadership lost) is replaced: keys are re-enqueued by enqueueAll.
    if (this.queue.shuttingDown) this.queue = new WorkQueue({ name: this.name, metrics: this.#o.metrics });
    for (let i = 0; i < this.#o.workers; i++) this.#workers.push(this.#work());
  }

  async stop(): Promise<void> {
    this.queue.shutDown();
    await Promise.all(this.#workers);
    this.#workers = [];
  }

  async #work(): Promise<void> {
    for (;;) {
      const key = await this.queue.get();
      if (key === undefined) return;
      await this.#reconcileKey(key);
      this.queue.done(key);
    }
  }

  async #reconcileKey(key: string): Promise<void> {
    const { metrics, log, informer, reconciler, context } = this.#o;
    const controller = this.name;
    const { namespace, name } = splitKey(key);
    const started = performance.now();
    metrics.activeWorkers.inc({ controller });
    await tracer.startActiveSpan(`reconcile ${this.resource.kind}`, async (span) => {
      span.setAttributes({ 'k8s.namespace.name': namespace, 'tempora.resource.name': name, 'tempora.resource.kind': this.resource.kind });
      try {
        // Level-triggered: always act on the latest cached state, never on the event that queued the key.
        const obj = informer.get(namespace, name);
        // Gone, or being deleted: owner references let the garbage collector remove the children.
        const result = obj && !obj.metadata.deletionTimestamp ? await reconciler.reconcile(obj, context) : undefined;
        this.queue.forget(key);
        if (result?.requeueAfterMs !== undefined) {
          this.queue.addAfter(key, result.requeueAfterMs);
          metrics.reconcileTotal.inc({ controller, result: 'requeue_after' });
        } else {
          metrics.reconcileTotal.inc({ controller, result: 'success' });
        }
      } catch (err) {
        metrics.reconcileTotal.inc({ controller, result: 'error' });
        metrics.reconcileErrors.inc({ controller });
        span.recordException(err instanceof Error ? err : String(err));
        span.setStatus({ code: SpanStatusCode.ERROR, message: String(err) });
        log.warn({ controller, key, err: String(err), retries: this.queue.retries(key) }, 'reconcile failed; retrying');
        this.queue.addRateLimited(key);
      } finally {
        span.end();
        metrics.activeWorkers.dec({ controller });
        metrics.reconcileTime.observe({ controller }, (performance.now() - started) / 1000);
      }
    });
  }
}
