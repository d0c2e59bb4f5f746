// Wires informers, controllers, leader election and the HTTP endpoints into one operator instance.
import type { Server } from 'node:http';
import type { Logger } from 'pino';
import type { OperatorConfig } from './config.ts';
import { Controller } from './controller.ts';
import { startHttpServer } from './http-server.ts';
import { FIELD_MANAGER, KubeClient } from './kube/client.ts';
import type { Connection } from './kube/connection.ts';
import { EventRecorder } from './kube/events.ts';
import { Informer } from './kube/informer.ts';
import { LeaderElector } from './kube/leader-election.ts';
import { projectChild } from './kube/projection.ts';
import { OPTIONAL_CHILDREN, WATCHED_CHILDREN, type ResourceType } from './kube/resources.ts';
import { createMetrics, type OperatorMetrics } from './metrics.ts';
import { OptionalApis } from './optional-apis.ts';
import { agentPoolReconciler } from './reconcilers/agent-pool.ts';
import { CHILD_READ_PATHS, MANAGED_BY, MANAGED_BY_LABEL, type ReconcileContext } from './reconcilers/context.ts';
import { gatewayReconciler } from './reconcilers/gateway.ts';
import { graphWorkerReconciler } from './reconcilers/graph-worker.ts';
import { simulationBudgetReconciler } from './reconcilers/simulation-budget.ts';

const RECONCILERS = [gatewayReconciler, graphWorkerReconciler, agentPoolReconciler, simulationBudgetReconciler];

export interface OperatorOptions {
  config: OperatorConfig;
  connection: Connection;
  log: Logger;
  /**
   * Called when leadership is lost. main.ts exits, as controller-runtime does, so that the pod restarts
   * as a clean candidate; without it the instance stops its workers and campaigns again.
   */
  onLostLeadership?: () => void;
  /**
   * How long a probe of an optional API (ServiceMonitors, PodMonitors, a metrics adapter) is trusted; the leader
   * probes again at this interval and reconciles everything again when an answer changed. 30 s.
   */
  featureTtlMs?: number;
}

export class Operator {
  readonly metrics: OperatorMetrics = createMetrics();
  readonly client: KubeClient;
  readonly informers = new Map<string, Informer>();
  readonly controllers: Controller[];
  readonly #o: OperatorOptions;
  readonly #elector: LeaderElector | undefined;
  readonly #children = new Map<string, Informer>();
  readonly #newInformer: (resource: ResourceType, child: boolean) => Informer;
  readonly #optionalApis: OptionalApis;
  readonly #featureTtlMs: number;
  #featureTimer: NodeJS.Timeout | undefined;
  #server: Server | undefined;
  #leading = false;
  #stopping = false;

  constructor(options: OperatorOptions) {
    this.#o = options;
    const { config, log } = options;
    this.client = new KubeClient(options.connection, this.metrics.apiWrites);
    // Children are watched by the managed-by label and not resynced: resyncing their owners re-reads
    // them from the cache anyway.
    this.#newInformer = (resource: ResourceType, child: boolean) =>
      new Informer({
        client: this.client,
        resource,
        metrics: this.metrics,
        log,
        namespace: config.watchNamespace,
        labelSelector: child ? `${MANAGED_BY_LABEL}=${MANAGED_BY}` : undefined,
        resyncMs: child ? 0 : config.resyncMs,
        maxBackoffMs: 10_000,
        transform: child ? (obj) => projectChild(obj, FIELD_MANAGER, CHILD_READ_PATHS[resource.plural]) : undefined,
      });
    for (const child of WATCHED_CHILDREN) this.#addChildInformer(child);
    this.#featureTtlMs = options.featureTtlMs ?? 30_000;
    this.#optionalApis = new OptionalApis(this.client, this.#featureTtlMs);
    const context: ReconcileContext = {
      client: this.client,
      log,
      events: new EventRecorder(this.client, log, config.identity),
      features: this.#optionalApis,
      children: this.#children,
      appliedGenerations: new Map(),
    };
    this.controllers = RECONCILERS.map((reconciler) => {
      const primary = this.#newInformer(reconciler.resource, false);
      this.informers.set(reconciler.resource.plural, primary);
      return new Controller({ reconciler, informer: primary, context, metrics: this.metrics, log, workers: config.workers });
    });
    if (config.leaderElection) {
      this.#elector = new LeaderElector({
        client: this.client,
        namespace: config.leaderElectionNamespace,
        name: config.leaderElectionId,
        identity: config.identity,
        log,
        metrics: this.metrics,
        onStartedLeading: () => this.#lead(),
        onStoppedLeading: () => {
          if (this.#stopping) return;
          void this.#stopControllers();
          options.onLostLeadership?.();
        },
      });
    }
  }

  get isLeader(): boolean {
    return this.#leading;
  }

  get port(): number | undefined {
    const address = this.#server?.address();
    return typeof address === 'object' && address ? address.port : undefined;
  }

  ready(): boolean {
    return !this.#stopping && [...this.informers.values()].every((i) => i.hasSynced);
  }

  async start(): Promise<void> {
    this.#server = await startHttpServer(this.#o.config.port, this.metrics.registry, { healthy: () => true, ready: () => this.ready() });
    // ServiceMonitors and PodMonitors are watched like the other children when their CRD is installed at
    // start-up; one installed later is still applied (and compared by a read), and watched after a restart.
    for (const resource of OPTIONAL_CHILDREN) {
      if (await this.#optionalApis.serves(resource)) this.#addChildInformer(resource);
    }
    for (const i of this.informers.values()) i.start();
    await Promise.all([...this.informers.values()].map((i) => i.waitForSync()));
    if (this.#elector) this.#elector.start();
    else this.#lead();
  }

  /** Graceful: finish in-flight reconciles, release the lease, stop watching, close the port. */
  async stop(): Promise<void> {
    this.#stopping = true;
    await this.#stopControllers();
    await this.#elector?.stop();
    await Promise.all([...this.informers.values()].map((i) => i.stop()));
    const server = this.#server;
    if (server) {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAllConnections();
      await closed;
    }
  }

  /** What the periodic resync does, now: every custom resource is reconciled again from the caches. */
  resyncAll(): void {
    for (const c of this.controllers) this.informers.get(c.resource.plural)?.resync();
  }

  /** True when no controller has queued or in-flight work or a pending retry (requeue-after timers do not count). */
  idle(): boolean {
    return this.controllers.every((c) => c.queue.length === 0 && !c.queue.busy);
  }

  #addChildInformer(resource: ResourceType): void {
    const informer = this.#newInformer(resource, true);
    informer.onEvent((_event, obj) => {
      for (const c of this.controllers) c.enqueueOwnerOf(obj);
    });
    this.#children.set(resource.plural, informer);
    this.informers.set(resource.plural, informer);
  }

  #lead(): void {
    if (this.#leading || this.#stopping) return;
    this.#leading = true;
    this.#o.log.info('starting controllers');
    for (const c of this.controllers) {
      c.startWorkers();
      c.enqueueAll();
    }
    void this.#refreshFeatures();
    this.#featureTimer = setInterval(() => void this.#refreshFeatures(), this.#featureTtlMs);
    this.#featureTimer.unref();
  }

  /** An optional API that appeared or went away changes what the reconcilers want, and no watch tells them. */
  async #refreshFeatures(): Promise<void> {
    if (!(await this.#optionalApis.refresh()) || !this.#leading) return;
    this.#o.log.info('an optional API appeared or went away; reconciling everything again');
    for (const c of this.controllers) c.enqueueAll();
  }

  async #stopControllers(): Promise<void> {
    if (!this.#leading) return;
    this.#leading = false;
    clearInterval(this.#featureTimer);
    await Promise.all(this.controllers.map((c) => c.stop()));
  }
}
