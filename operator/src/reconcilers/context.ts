// What every reconcile gets, and how every child is labelled and owned.
import type { Logger } from 'pino';
import type { Affinity, AgentPool, GraphWorker, Resources, SimulationBudget, TemporaGateway } from '../api/v1alpha1/index.ts';
import type { KubeClient } from '../kube/client.ts';
import type { EventRecorder } from '../kube/events.ts';
import type { AnyInformer, Informer } from '../kube/informer.ts';
import type { KubeObject, OwnerReference, Pod } from '../kube/object.ts';
import type { ReadPaths } from '../kube/projection.ts';
import type { ResourceType } from '../kube/resources.ts';
import type { BudgetReader } from './budget-reports.ts';
import type { GatewaySecrets } from './gateway-secrets.ts';

export const MANAGED_BY_LABEL = 'app.kubernetes.io/managed-by';
export const MANAGED_BY = 'tempora-operator';
/**
 * On every pod the operator's workloads make: the uid of the custom resource they run for. Pods are
 * controlled by ReplicaSets and Jobs, not by the custom resource, so this is how a pod finds its way back.
 */
export const OWNER_UID_LABEL = 'tempora.dev/owner-uid';

/**
 * Fields of children that reconcilers read although the operator does not apply them, by plural: the
 * informer caches keep these next to the applied fields (see kube/projection.ts).
 */
export const CHILD_READ_PATHS: Record<string, ReadPaths> = {
  // spec.replicas also when others own it (an HPA, kubectl scale): readiness waits for that many pods.
  deployments: [
    ['spec', 'replicas'],
    ['status', 'observedGeneration'],
    ['status', 'replicas'],
    ['status', 'updatedReplicas'],
    ['status', 'availableReplicas'],
    ['status', 'conditions'],
  ],
  horizontalpodautoscalers: [['status', 'desiredReplicas']],
  cronjobs: [['status', 'lastScheduleTime']],
  // Why a pod does not start (readiness.ts); the operator writes no pod.
  pods: [
    ['status', 'phase'],
    ['status', 'reason'],
    ['status', 'message'],
    ['status', 'conditions'],
    ['status', 'initContainerStatuses'],
    ['status', 'containerStatuses'],
  ],
};

/** Optional APIs, probed at most once per TTL unless `fresh` asks for a new answer. */
export interface Features {
  /** An optional child type (OPTIONAL_CHILDREN: ServiceMonitor, PodMonitor, ScaledObject) is served: its CRD is installed. */
  serves(resource: ResourceType, fresh?: boolean): Promise<boolean>;
  /** An external.metrics.k8s.io APIService is registered (a metrics adapter), so HPAs may use queue depth. */
  externalMetrics(fresh?: boolean): Promise<boolean>;
}

/** The informers of the four custom resources, which reconcilers read each other's kinds from. */
export interface OwnerInformers {
  gateways: Informer<TemporaGateway>;
  workers: Informer<GraphWorker>;
  pools: Informer<AgentPool>;
  budgets: Informer<SimulationBudget>;
}

export interface ReconcileContext {
  client: KubeClient;
  log: Logger;
  events: EventRecorder;
  features: Features;
  /** Informer caches of the child types, keyed by plural. */
  children: Map<string, AnyInformer>;
  /** The pods of the operator's workloads, indexed by their custom resource's uid (OWNER_UID_LABEL). */
  pods: Informer<Pod>;
  /** Informer caches of the four custom resources: workers read their TemporaGateway, a TemporaGateway its AgentPool. */
  owners: OwnerInformers;
  /**
   * The generation each Deployment had when the operator last applied it, by uid (see readiness.ts).
   * In memory only: after a restart the Deployment's current generation stands in.
   */
  appliedGenerations: Map<string, number>;
  /**
   * Since when each custom resource (by uid) has had a change of counts alone waiting to be written
   * (updateStatus). In memory only: after a restart the wait starts again.
   */
  heldStatus: Map<string, number>;
  /** What the simulation services report of the SimulationBudgets. */
  budgetReports: BudgetReader;
  /** BUDGET_POLL_SECONDS, in milliseconds. */
  budgetPollMs: number;
  /**
   * The alert thresholds each SimulationBudget (by uid) has had an Event for, and in which period. In
   * memory only: status keeps what was crossed across restarts; this covers a cache not yet showing the
   * status just written.
   */
  budgetAlerts: Map<string, { period: string; thresholds: number[] }>;
  /** The Secrets each TemporaGateway names: whether they are there, and when its certificate expires. */
  secrets: GatewaySecrets;
}

export interface ReconcileResult {
  requeueAfterMs?: number;
}

/**
 * One kind's reconcile. `T` is the kind's API type (api/v1alpha1): its informer holds only objects of
 * that kind, which the API server has validated and defaulted against the CRD the type is generated from.
 */
export interface Reconciler<T extends KubeObject = KubeObject> {
  resource: ResourceType<T>;
  reconcile(obj: T, ctx: ReconcileContext): Promise<ReconcileResult | void>;
}

/**
 * Pod fields the CRDs pass through wider than client-node's models type them: quantities may be numbers
 * (spec.resources) and affinity terms open objects (spec.pods.affinity). The API server takes both, and
 * the JSON is applied as built, so that its spec hash (drift.ts) stays the same.
 */
interface PassedThrough {
  resources: Resources;
  affinity: Affinity;
}

/** A kind's JSON (kube/object.ts) as the operator writes it: the fields in PassedThrough as the CRDs pass them. */
export type Written<T> = T extends readonly (infer U)[]
  ? Written<U>[]
  : T extends object
    ? { [K in keyof T]: K extends keyof PassedThrough ? PassedThrough[K] : Written<T[K]> }
    : T;

/** What a child of kind `T` holds besides apiVersion, kind and metadata, as the operator writes it. */
export type ChildFields<T extends KubeObject> = Omit<Written<T>, 'apiVersion' | 'kind' | 'metadata'>;

/**
 * A child as the operator applies it: the fields it owns, built typed by its kind (workload.ts, child) and
 * carried as JSON of any kind, which childObject completes with the resource's apiVersion and kind.
 */
export interface DesiredChild {
  resource: ResourceType;
  object: KubeObject;
  /**
   * A child created once and then left alone (the gateway's signing key): the fields it is created with,
   * made only when it does not exist. It is never applied or compared, only recreated when deleted.
   */
  createWith?: () => Record<string, unknown>;
}

export function ownerReference(owner: KubeObject): OwnerReference {
  return {
    apiVersion: owner.apiVersion,
    kind: owner.kind,
    name: owner.metadata.name,
    uid: owner.metadata.uid ?? '',
    controller: true,
    blockOwnerDeletion: true,
  };
}

export function childLabels(owner: KubeObject, component: string): Record<string, string> {
  return {
    'app.kubernetes.io/name': component,
    'app.kubernetes.io/instance': owner.metadata.name,
    'app.kubernetes.io/part-of': 'tempora',
    [MANAGED_BY_LABEL]: MANAGED_BY,
    [`tempora.dev/${owner.kind.toLowerCase()}`]: owner.metadata.name,
  };
}
