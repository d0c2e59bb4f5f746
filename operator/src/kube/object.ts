// The plain-JSON shape of Kubernetes objects as the API server sends them. The operator works on plain
// JSON throughout (see client.ts for why): KubeObject is an object of any kind, and the kinds it reads
// and writes are typed from @kubernetes/client-node's models (core kinds) and from the CRDs
// (api/v1alpha1, the operator's own kinds).
//
// The models are classes for client-node's ObjectSerializer, which turns timestamps into Date objects;
// the JSON on the wire (and so every object here, from a watch, a list or an apply) carries them as
// RFC 3339 strings. Json<> is a model with every Date as the string it is on the wire, so that reading a
// timestamp as a Date, which it never is here, does not typecheck. The serializer is not used: it would
// copy every object of every watch event to change only its timestamps, and the operator compares and
// hashes the JSON as it is (drift.ts, projection.ts).
import type {
  CoreV1Event,
  V1ConfigMap,
  V1CronJob,
  V1Deployment,
  V1Ingress,
  V1LabelSelector,
  V1Lease,
  V1ObjectMeta,
  V1OwnerReference,
  V1Pod,
  V1PodDisruptionBudget,
  V1Secret,
  V1Service,
  V1Status,
  V2HorizontalPodAutoscaler,
  V2HorizontalPodAutoscalerBehavior,
} from '@kubernetes/client-node';

/** A client-node model as JSON: Dates are strings, `any` (a managedFields set) is unknown. */
export type Json<T> = 0 extends 1 & T
  ? unknown
  : T extends Date
    ? string
    : T extends readonly (infer U)[]
      ? Json<U>[]
      : T extends object
        ? { [K in keyof T]: Json<T[K]> }
        : T;

export type OwnerReference = Json<V1OwnerReference>;

/** Metadata as the API server returns it, which always names the object. */
export type ObjectMeta = Json<V1ObjectMeta> & { name: string };

export interface KubeObject {
  apiVersion: string;
  kind: string;
  metadata: ObjectMeta;
  spec?: Record<string, unknown>;
  status?: Record<string, unknown>;
  [key: string]: unknown;
}

export interface KubeList<T extends KubeObject = KubeObject> {
  metadata: { resourceVersion?: string; continue?: string };
  items: T[];
}

/** A core kind as the API server sends it: the model's fields as JSON, with apiVersion, kind and name always there. */
export type Kind<M> = Json<Omit<M, 'apiVersion' | 'kind' | 'metadata'>> & Pick<KubeObject, 'apiVersion' | 'kind' | 'metadata'>;

export type Deployment = Kind<V1Deployment>;
export type Service = Kind<V1Service>;
export type ConfigMap = Kind<V1ConfigMap>;
export type Secret = Kind<V1Secret>;
export type Pod = Kind<V1Pod>;
export type PodDisruptionBudget = Kind<V1PodDisruptionBudget>;
export type Ingress = Kind<V1Ingress>;
export type CronJob = Kind<V1CronJob>;
export type HorizontalPodAutoscaler = Kind<V2HorizontalPodAutoscaler>;
export type Event = Kind<CoreV1Event>;
export type Lease = Kind<V1Lease>;
/** What a watch's ERROR event carries, and what a refused request answers. */
export type Status = Json<V1Status>;

/** How a Prometheus Operator monitor scrapes (no client-node model: its CRDs are not Kubernetes'); the fields the operator sets. */
export interface MetricsEndpoint {
  port: string;
  path: string;
  interval: string;
  relabelings: { action: string; targetLabel: string; replacement: string }[];
}

/** The Prometheus Operator's ServiceMonitor, as far as the operator writes it. */
export type ServiceMonitor = Pick<KubeObject, 'apiVersion' | 'kind' | 'metadata'> & {
  spec?: { selector: Json<V1LabelSelector>; endpoints: MetricsEndpoint[] };
};

/** The Prometheus Operator's PodMonitor, as far as the operator writes it. */
export type PodMonitor = Pick<KubeObject, 'apiVersion' | 'kind' | 'metadata'> & {
  spec?: { selector: Json<V1LabelSelector>; podMetricsEndpoints: MetricsEndpoint[] };
};

/** One of a ScaledObject's triggers: its scaler's type and settings, all strings (KEDA's trigger metadata). */
export interface ScaledObjectTrigger {
  type: string;
  metricType?: 'AverageValue' | 'Value' | 'Utilization';
  metadata: Record<string, string>;
}

/** KEDA's ScaledObject (no client-node model: KEDA's CRD is not Kubernetes'), as far as the operator writes it. */
export type ScaledObject = Pick<KubeObject, 'apiVersion' | 'kind' | 'metadata'> & {
  spec?: {
    scaleTargetRef: { apiVersion?: string; kind?: string; name: string };
    minReplicaCount?: number;
    maxReplicaCount?: number;
    pollingInterval?: number;
    advanced?: { horizontalPodAutoscalerConfig?: { name?: string; behavior?: Json<V2HorizontalPodAutoscalerBehavior> } };
    triggers: ScaledObjectTrigger[];
  };
  status?: { hpaName?: string; conditions?: { type: string; status: string; reason?: string; message?: string }[] };
};

/** A JSON object: what a value is once `typeof` says object, read key by key. */
export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

export function objectKey(namespace: string | undefined, name: string): string {
  return namespace ? `${namespace}/${name}` : name;
}

export function splitKey(key: string): { namespace: string; name: string } {
  const slash = key.indexOf('/');
  return slash < 0 ? { namespace: '', name: key } : { namespace: key.slice(0, slash), name: key.slice(slash + 1) };
}
