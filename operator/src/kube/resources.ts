// The API resources the operator reads and writes. Paths are built from this table instead of being
// discovered at run time: every type here is fixed by the CRDs and RBAC the operator ships with.
//
// Each descriptor carries the type of its objects (ResourceType<T>), so that the client and the
// informers return what the resource holds: `client.get(R.Deployment, …)` a Deployment,
// `client.get(R.TemporaGateway, …)` a TemporaGateway.
import type * as Api from '../api/v1alpha1/index.ts';
import type * as K from './object.ts';
import type { KubeObject } from './object.ts';

/** Type-level only: no descriptor has this key at run time. */
declare const objects: unique symbol;

export interface ResourceType<T extends KubeObject = KubeObject> {
  group: string;
  version: string;
  kind: string;
  plural: string;
  /** The type of the resource's objects; never set, it only ties the descriptor to T. */
  readonly [objects]?: T;
}

export function apiVersionOf(r: ResourceType): string {
  return r.group === '' ? r.version : `${r.group}/${r.version}`;
}

/**
 * Whether an object is of the resource's kind, as its apiVersion and kind say: how a mixed collection (the
 * children applied for an owner) is read by kind.
 */
export function isOf<T extends KubeObject>(r: ResourceType<T>, obj: KubeObject): obj is T {
  return obj.kind === r.kind && obj.apiVersion === apiVersionOf(r);
}

export function collectionPath(r: ResourceType, namespace?: string): string {
  const base = r.group === '' ? `/api/${r.version}` : `/apis/${r.group}/${r.version}`;
  return namespace ? `${base}/namespaces/${namespace}/${r.plural}` : `${base}/${r.plural}`;
}

export function objectPath(r: ResourceType, namespace: string, name: string): string {
  return `${collectionPath(r, namespace)}/${encodeURIComponent(name)}`;
}

export const GROUP = 'tempora.dev';
export const VERSION = 'v1alpha1';

export const TemporaGateway: ResourceType<Api.TemporaGateway> = { group: GROUP, version: VERSION, kind: 'TemporaGateway', plural: 'temporagateways' };
export const GraphWorker: ResourceType<Api.GraphWorker> = { group: GROUP, version: VERSION, kind: 'GraphWorker', plural: 'graphworkers' };
export const AgentPool: ResourceType<Api.AgentPool> = { group: GROUP, version: VERSION, kind: 'AgentPool', plural: 'agentpools' };
export const SimulationBudget: ResourceType<Api.SimulationBudget> = {
  group: GROUP,
  version: VERSION,
  kind: 'SimulationBudget',
  plural: 'simulationbudgets',
};

export const Deployment: ResourceType<K.Deployment> = { group: 'apps', version: 'v1', kind: 'Deployment', plural: 'deployments' };
export const Service: ResourceType<K.Service> = { group: '', version: 'v1', kind: 'Service', plural: 'services' };
export const ConfigMap: ResourceType<K.ConfigMap> = { group: '', version: 'v1', kind: 'ConfigMap', plural: 'configmaps' };
export const Secret: ResourceType<K.Secret> = { group: '', version: 'v1', kind: 'Secret', plural: 'secrets' };
export const Pod: ResourceType<K.Pod> = { group: '', version: 'v1', kind: 'Pod', plural: 'pods' };
export const PodDisruptionBudget: ResourceType<K.PodDisruptionBudget> = {
  group: 'policy',
  version: 'v1',
  kind: 'PodDisruptionBudget',
  plural: 'poddisruptionbudgets',
};
export const Ingress: ResourceType<K.Ingress> = { group: 'networking.k8s.io', version: 'v1', kind: 'Ingress', plural: 'ingresses' };
export const CronJob: ResourceType<K.CronJob> = { group: 'batch', version: 'v1', kind: 'CronJob', plural: 'cronjobs' };
export const HorizontalPodAutoscaler: ResourceType<K.HorizontalPodAutoscaler> = {
  group: 'autoscaling',
  version: 'v2',
  kind: 'HorizontalPodAutoscaler',
  plural: 'horizontalpodautoscalers',
};
export const ServiceMonitor: ResourceType<K.ServiceMonitor> = {
  group: 'monitoring.coreos.com',
  version: 'v1',
  kind: 'ServiceMonitor',
  plural: 'servicemonitors',
};
export const PodMonitor: ResourceType<K.PodMonitor> = { group: 'monitoring.coreos.com', version: 'v1', kind: 'PodMonitor', plural: 'podmonitors' };
export const ScaledObject: ResourceType<K.ScaledObject> = { group: 'keda.sh', version: 'v1alpha1', kind: 'ScaledObject', plural: 'scaledobjects' };
export const Event: ResourceType<K.Event> = { group: '', version: 'v1', kind: 'Event', plural: 'events' };
export const Lease: ResourceType<K.Lease> = { group: 'coordination.k8s.io', version: 'v1', kind: 'Lease', plural: 'leases' };

/** Child types the operator watches so that drift and hand deletions are seen without polling. */
export const WATCHED_CHILDREN: ResourceType[] = [Deployment, Service, ConfigMap, Secret, PodDisruptionBudget, Ingress, CronJob, HorizontalPodAutoscaler];

/**
 * Child types served only when their CRD is installed (the Prometheus Operator's, KEDA's): applied while
 * the API serves them, and watched like WATCHED_CHILDREN when it did at start-up.
 */
export const OPTIONAL_CHILDREN: ResourceType[] = [ServiceMonitor, PodMonitor, ScaledObject];
