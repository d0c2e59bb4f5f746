// Wires informers, controllers, leader election and the HTTP endpoints into one operator instance.
import type { Server } from 'node:http';
import type { Logger } from 'pino';
import type { OperatorConfig } from './config.ts';
import { Controller } from './controller.ts';
import { startHttpServer } from './http-server.ts';
import { FIELD_MANAGER, KubeClient } from './kube/client.ts';
import type { Connection } from './kube/connection.ts';
import { EventRecorder } from './kube/events.ts';
import { type AnyInformer, Informer } from './kube/informer.ts';
import { LeaderElector } from './kube/leader-election.ts';
import type { KubeObject, Secret } from './kube/object.ts';
import { projectChild } from './kube/projection.ts';
import * as R from './kube/resources.ts';
import { OPTIONAL_CHILDREN, type ResourceType, WATCHED_CHILDREN } from './kube/resources.ts';
import { createMetrics, type OperatorMetrics } from './metrics.ts';
import { OptionalApis } from './optional-apis.ts';
import { agentPoolReconciler } from './reconcilers/agent-pool.ts';
import { BudgetReports } from './reconcilers/budget-reports.ts';
import {
  CHILD_READ_PATHS,
  MANAGED_BY,
  MANAGED_BY_LABEL,
  OWNER_UID_LABEL,
  type OwnerInformers,
  type ReconcileContext,
  type Reconciler,
} from './reconcilers/context.ts';
import { gatewayReconciler } from './reconcilers/gateway.ts';
import { GatewaySecrets } from './reconcilers/gateway-secrets.ts';
import { GENERATED_SECRET_SELECTOR, GeneratedSecrets, keyNamesOnly } from './reconcilers/generated-secrets.ts';
import { graphWorkerReconciler } from './reconcilers/graph-worker.ts';
import { simulationBudgetReconciler } from './reconcilers/simulation-budget.ts';
import { watchBudgetGateways, watchGatewayDependents, watchGeneratedSecrets, watchPoolGateways } from './references.ts';

/** Where `informers` keeps the informer of the Secrets the operator generates keys in ("secrets" is its children's). */
export const GENERATED_SECRETS = 'secrets/generated';

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
  readonly informers = new Map<string, AnyInformer>();
  readonly controllers: Controller[];
  readonly #o: OperatorOptions;
  readonly #elector: LeaderElector | undefined;
  readonly #children = new Map<string, AnyInformer>();
  readonly #newInformer: <T extends KubeObject>(resource: ResourceType<T>, child: boolean) => Informer<T>;
  readonly #owners: OwnerInformers;
  readonly #optionalApis: OptionalApis;
  readonly #featureTtlMs: number;
  readonly #secrets: GatewaySecrets;
  /** Each controller's own informer (two watch Secrets, so the plural alone does not name it). */
  readonly #primaries = new Map<Controller, AnyInformer>();
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
    this.#newInformer = <T extends KubeObject>(resource: ResourceType<T>, child: boolean) =>
      new Informer<T>({
        client: this.client,
        resource,
        metrics: this.metrics,
        log,
        namespace: config.watchNamespace,
        labelSelector: child ? `${MANAGED_BY_LABEL}=${MANAGED_BY}` : undefined,
        resyncMs: child ? 0 : config.resyncMs,
        maxBackoffMs: 10_000,
        transform: child ? (obj) => projectChild(obj, FIELD_MANAGER, CHILD_READ_PATHS[resource.plural]) : undefined,
        // Pods are controlled by ReplicaSets and Jobs; they carry their custom resource's uid instead.
        indexUid: resource === R.Pod ? (obj) => obj.metadata.labels?.[OWNER_UID_LABEL] : undefined,
      });
    for (const child of WATCHED_CHILDREN) this.#addChildInformer(child);
    // The pods of the workloads, to tell why they do not start; a pod's event reconciles its custom resource.
    const pods = this.#newInformer(R.Pod, true);
    pods.onEvent((_event, pod) => {
      for (const c of this.controllers) c.enqueueLabelled(pod);
    });
    this.informers.set(R.Pod.plural, pods);
    this.#owners = {
      gateways: this.#newInformer(R.TemporaGateway, false),
      workers: this.#newInformer(R.GraphWorker, false),
      pools: this.#newInformer(R.AgentPool, false),
      budgets: this.#newInformer(R.SimulationBudget, false),
    };
    for (const informer of Object.values(this.#owners)) this.informers.set(informer.resource.plural, informer);
    this.#featureTtlMs = options.featureTtlMs ?? 30_000;
    this.#optionalApis = new OptionalApis(this.client, this.#featureTtlMs);
    this.#secrets = new GatewaySecrets(this.client, this.metrics, log, (namespace, name) => this.#owners.gateways.get(namespace, name) !== undefined);
    const context: ReconcileContext = {
      client: this.client,
      log,
      events: new EventRecorder(this.client, log, config.identity),
      features: this.#optionalApis,
      children: this.#children,
      pods,
      owners: this.#owners,
      appliedGenerations: new Map(),
      heldStatus: new Map(),
      budgetReports: new BudgetReports(this.client, config.serviceUrlTemplate),
      budgetPollMs: config.budgetPollMs,
      budgetAlerts: new Map(),
      secrets: this.#secrets,
    };
    this.controllers = [
      this.#controller(gatewayReconciler, this.#owners.gateways, context),
      this.#controller(graphWorkerReconciler, this.#owners.workers, context),
      this.#controller(agentPoolReconciler, this.#owners.pools, context),
      this.#controller(simulationBudgetReconciler, this.#owners.budgets, context),
    ];
    const generated = this.#generatedSecretsInformer();
    this.controllers.push(this.#generatedSecretsController(context, generated));
    this.#watchReferences(generated);
    if (config.leaderElection) this.#elector = this.#newElector();
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
    for (const c of this.controllers) this.#primaries.get(c)?.resync();
  }

  /** True when no controller has queued or in-flight work or a pending retry (requeue-after timers do not count). */
  idle(): boolean {
    return this.controllers.every((c) => c.queue.length === 0 && !c.queue.busy);
  }

  #controller<T extends KubeObject>(reconciler: Reconciler<T>, informer: Informer<T>, context: ReconcileContext): Controller {
    const { config, log } = this.#o;
    const controller = new Controller({ reconciler, informer, context, metrics: this.metrics, log, workers: config.workers });
    this.#primaries.set(controller, informer);
    return controller;
  }

  /** Secrets whose keys the operator generates: only those labelled for it, cached without their values. */
  #generatedSecretsController(context: ReconcileContext, generated: Informer<Secret>): Controller {
    const generatedSecrets = new GeneratedSecrets();
    generated.onEvent((event, secret) => {
      if (event === 'delete') generatedSecrets.forget(secret.metadata.uid);
    });
    this.informers.set(GENERATED_SECRETS, generated);
    return this.#controller(generatedSecrets, generated, context);
  }

  #generatedSecretsInformer(): Informer<Secret> {
    const { config, log } = this.#o;
    return new Informer({
      client: this.client,
      resource: R.Secret,
      metrics: this.metrics,
      log,
      namespace: config.watchNamespace,
      labelSelector: GENERATED_SECRET_SELECTOR,
      resyncMs: config.resyncMs,
      maxBackoffMs: 10_000,
      transform: keyNamesOnly,
    });
  }

  #newElector(): LeaderElector {
    const { config, log } = this.#o;
    return new LeaderElector({
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
        this.#o.onLostLeadership?.();
      },
    });
  }

  #addChildInformer(resource: ResourceType): void {
    const informer = this.#newInformer(resource, true);
    informer.onEvent((_event, obj) => {
      for (const c of this.controllers) c.enqueueOwnerOf(obj);
    });
    this.#children.set(resource.plural, informer);
    this.informers.set(resource.plural, informer);
  }

  /**
   * Kinds that depend on each other: a GraphWorker, AgentPool or SimulationBudget on the TemporaGateway it names,
   * a TemporaGateway on the AgentPool serving it, on the SimulationBudgets naming it and on the Secrets the
   * operator fills for it, and pools naming one TemporaGateway on each other. None owns the other, so no owner
   * reference brings these events; each relation is mapped in references.ts.
   */
  #watchReferences(generated: Informer<Secret>): void {
    const kinds = { owners: this.#owners, controllers: this.controllers };
    watchGatewayDependents(kinds, (namespace, name) => this.#secrets.forget(namespace, name));
    watchGeneratedSecrets(kinds, generated);
    watchBudgetGateways(kinds);
    watchPoolGateways(kinds);
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
    this.#secrets.forgetAll();
  }
}
