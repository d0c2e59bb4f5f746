// Wires informers, controllers, leader election and the HTTP endpoints into one operator instance.
import type { Server } from 'node:http';
import type { KubeConfig } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type { OperatorConfig } from './config.ts';
import { Controller } from './controller.ts';
import { startHttpServer } from './http-server.ts';
import { KubeClient } from './kube/client.ts';
import { EventRecorder } from './kube/events.ts';
import { Informer } from './kube/informer.ts';
import { LeaderElector } from './kube/leader-election.ts';
import { ServiceMonitor, WATCHED_CHILDREN, type ResourceType } from './kube/resources.ts';
import { createMetrics, type OperatorMetrics } from './metrics.ts';
import { agentPoolReconciler } from './reconcilers/agent-pool.ts';
import { MANAGED_BY, MANAGED_BY_LABEL, type Features, type ReconcileContext } from './reconcilers/context.ts';
import { gatewayReconciler } from './reconcilers/gateway.ts';
import { graphWorkerReconciler } from './reconcilers/graph-worker.ts';
import { simulationBudgetReconciler } from './reconcilers/simulation-budget.ts';

const RECONCILERS = [gatewayReconciler, graphWorkerReconciler, agentPoolReconciler, simulationBudgetReconciler];
const FEATURE_TTL_MS = 30_000;

export interface OperatorOptions {
  config: OperatorConfig;
  kubeConfig: KubeConfig;
  log: Logger;
  /**
   * Called when leadership is lost. main.ts exits, as controller-runtime does, so that the pod restarts
   * as a clean candidate; without it the instance stops its workers and campaigns again.
   */
  onLostLeadership?: () => void;
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
  readonly #featureProbes: Features;
  #server: Server | undefined;
  #leading = false;
  #stopping = false;

  constructor(options: OperatorOptions) {
    this.#o = options;
    const { config, log } = options;
    this.client = new KubeClient(options.kubeConfig, this.metrics.apiWrites);
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
      });
    for (const child of WATCHED_CHILDREN) this.#addChildInformer(child);
    this.#featureProbes = this.#features();
    const context: ReconcileContext = {
      client: this.client,
      log,
      events: new EventRecorder(this.client, log, config.identity),
      features: this.#featureProbes,
      children: this.#children,
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
    // ServiceMonitors are watched like the other children when their CRD is installed at start-up; one
    // installed later is still applied (and compared by a read), and watched after a restart.
    if (await this.#featureProbes.serviceMonitors()) this.#addChildInformer(ServiceMonitor);
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
  }

  async #stopControllers(): Promise<void> {
    if (!this.#leading) return;
    this.#leading = false;
    await Promise.all(this.controllers.map((c) => c.stop()));
  }

  #features(): Features {
    const cached = new Map<string, { at: number; value: Promise<boolean> }>();
    const probe = (groupVersion: string, plural?: string) => (): Promise<boolean> => {
      const hit = cached.get(groupVersion);
      if (hit && Date.now() - hit.at < FEATURE_TTL_MS) return hit.value;
      const value = this.client.serves(groupVersion, plural);
      cached.set(groupVersion, { at: Date.now(), value });
      value.catch(() => cached.delete(groupVersion));
      return value;
    };
    return {
      serviceMonitors: probe('monitoring.coreos.com/v1', 'servicemonitors'),
      externalMetrics: probe('external.metrics.k8s.io/v1beta1'),
    };
  }
}
