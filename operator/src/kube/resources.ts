// The API resources the operator reads and writes. Paths are built from this table instead of being
// discovered at run time: every type here is fixed by the CRDs and RBAC the operator ships with.

export interface ResourceType {
  group: string;
  version: string;
  kind: string;
  plural: string;
}

export function apiVersionOf(r: ResourceType): string {
  return r.group === '' ? r.version : `${r.group}/${r.version}`;
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

export const TemporaGateway: ResourceType = { group: GROUP, version: VERSION, kind: 'TemporaGateway', plural: 'temporagateways' };
export const GraphWorker: ResourceType = { group: GROUP, version: VERSION, kind: 'GraphWorker', plural: 'graphworkers' };
export const AgentPool: ResourceType = { group: GROUP, version: VERSION, kind: 'AgentPool', plural: 'agentpools' };
export const SimulationBudget: ResourceType = {
  group: GROUP,
  version: VERSION,
  kind: 'SimulationBudget',
  plural: 'simulationbudgets',
};

export const Deployment: ResourceType = { group: 'apps', version: 'v1', kind: 'Deployment', plural: 'deployments' };
export const Service: ResourceType = { group: '', version: 'v1', kind: 'Service', plural: 'services' };
export const ConfigMap: ResourceType = { group: '', version: 'v1', kind: 'ConfigMap', plural: 'configmaps' };
export const Secret: ResourceType = { group: '', version: 'v1', kind: 'Secret', plural: 'secrets' };
export const Pod: ResourceType = { group: '', version: 'v1', kind: 'Pod', plural: 'pods' };
export const PodDisruptionBudget: ResourceType = {
  group: 'policy',
  version: 'v1',
  kind: 'PodDisruptionBudget',
  plural: 'poddisruptionbudgets',
};
export const Ingress: ResourceType = { group: 'networking.k8s.io', version: 'v1', kind: 'Ingress', plural: 'ingresses' };
export const CronJob: ResourceType = { group: 'batch', version: 'v1', kind: 'CronJob', plural: 'cronjobs' };
export const HorizontalPodAutoscaler: ResourceType = {
  group: 'autoscaling',
  version: 'v2',
  kind: 'HorizontalPodAutoscaler',
  plural: 'horizontalpodautoscalers',
};
export const ServiceMonitor: ResourceType = {
  group: 'monitoring.coreos.com',
  version: 'v1',
  kind: 'ServiceMonitor',
  plural: 'servicemonitors',
};
export const PodMonitor: ResourceType = { group: 'monitoring.coreos.com', version: 'v1', kind: 'PodMonitor', plural: 'podmonitors' };
export const Event: ResourceType = { group: '', version: 'v1', kind: 'Event', plural: 'events' };
export const Lease: ResourceType = { group: 'coordination.k8s.io', version: 'v1', kind: 'Lease', plural: 'leases' };

/** Child types the operator watches so that drift and hand deletions are seen without polling. */
export const WATCHED_CHILDREN: ResourceType[] = [Deployment, Service, ConfigMap, Secret, PodDisruptionBudget, Ingress, CronJob, HorizontalPodAutoscaler];

/**
 * Child types served only when their CRD is installed (the Prometheus Operator's): applied while the
 * API serves them, and watched like WATCHED_CHILDREN when it did at start-up.
 */
export const OPTIONAL_CHILDREN: ResourceType[] = [ServiceMonitor, PodMonitor];
