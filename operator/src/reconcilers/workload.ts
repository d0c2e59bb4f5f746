// Builders for the children every Tempora workload is made of. Each returns only the fields the operator
// owns (see docs/operator.md, "Who owns which field"): everything else stays with the API server's
// defaults or with whoever sets it.

import { createHash } from 'node:crypto';
import type { V1Container, V1EnvFromSource, V1EnvVar, V1PodSpec, V1PodTemplateSpec, V1Volume } from '@kubernetes/client-node';
import { METRICS_PORT_OFFSET } from '@tempora/kit/config';
import type { ImageSpec, ModelsSpec, MonitoringSpec, PodSettings, Resources, SecretKeyRef, TracingSpec } from '../api/v1alpha1/index.ts';
import type { Json, KubeObject, MetricsEndpoint } from '../kube/object.ts';
import * as R from '../kube/resources.ts';
import { type ChildFields, childLabels, type DesiredChild, OWNER_UID_LABEL, type Written } from './context.ts';

/** Where a worker pod (AgentPool, GraphWorker) serves /health and /metrics, told through WORKER_PORT. */
export const WORKER_PORT = 8091;
/** The name of a pod's port (podTemplate), which probes, Services and the Ingress refer to. */
const PORT_NAME = 'http';
/**
 * A service's /metrics port (METRICS_PORT, its port + 1000: conventions.md, "Ports"), which its
 * ServiceMonitor scrapes and no Ingress routes. Workers have no Ingress: they serve /metrics on `http`.
 */
const METRICS_PORT_NAME = 'metrics';
/**
 * TEMPORA_DATA_DIR of every pod: an emptyDir, the one writable place besides /tmp (the root filesystem is
 * read-only). It holds a service's embedded database when there is no DATABASE_URL, and lives as long as the pod.
 */
export const DATA_DIR = '/var/lib/tempora';
/** How long a pod with a port keeps serving after its deletion, before SIGTERM (within the 30 s grace period). */
const PRE_STOP_SECONDS = 5;
/**
 * The target label every monitor the operator makes sets to the platform's name of what it scrapes
 * (gateway, generation, …, agent-pool, graph-worker): a label the platform owns, so that alerts and
 * dashboards select Tempora's series and no other workload's.
 */
export const COMPONENT_TARGET_LABEL = 'tempora_component';

export type EnvVar = Json<V1EnvVar>;
export type EnvFromSource = Json<V1EnvFromSource>;
type PodSpec = Written<Json<V1PodSpec>>;
type Container = Written<Json<V1Container>>;

/** A volume mounted read-only into the container, whole (no subPath, so updates to its source reach the pod). */
export interface ReadOnlyVolume {
  name: string;
  mountPath: string;
  /** The volume's source, e.g. `{ configMap: { name } }`. */
  source: Omit<Json<V1Volume>, 'name'>;
}

/** Model presets and policy, as the generation service reads them (services/generation/src/config.ts). */
export function modelSettings(models: ModelsSpec): Record<string, string> {
  return { MODEL_PRESETS: JSON.stringify(models.presets), MODEL_POLICY: JSON.stringify(models.policy) };
}

/** `<registry>/<name>:<version>`, pinned by `@<digest>` when the spec carries one for that image (a released chart does). */
export function image(spec: ImageSpec, name: string): string {
  const digest = spec.digests?.[name];
  return `${spec.registry.replace(/\/$/, '')}/${name}:${spec.version}${digest ? `@${digest}` : ''}`;
}

export function envFromSecretKey(name: string, ref: SecretKeyRef | undefined): EnvVar[] {
  return ref ? [{ name, valueFrom: { secretKeyRef: { name: ref.secretName, key: ref.key } } }] : [];
}

/**
 * The OpenTelemetry SDK's standard variables for a pod of the platform, and the pod's Kubernetes
 * resource attributes (semantic conventions) through the downward API.
 */
export function tracingEnv(tracing: TracingSpec | undefined): EnvVar[] {
  if (!tracing) return [];
  const field = (fieldPath: string) => ({ valueFrom: { fieldRef: { fieldPath } } });
  return [
    { name: 'OTEL_EXPORTER_OTLP_ENDPOINT', value: tracing.endpoint },
    { name: 'OTEL_EXPORTER_OTLP_PROTOCOL', value: tracing.protocol },
    { name: 'OTEL_TRACES_SAMPLER', value: 'parentbased_traceidratio' },
    { name: 'OTEL_TRACES_SAMPLER_ARG', value: String(tracing.samplingRatio) },
    { name: 'POD_NAME', ...field('metadata.name') },
    { name: 'POD_NAMESPACE', ...field('metadata.namespace') },
    { name: 'NODE_NAME', ...field('spec.nodeName') },
    // $(VAR) refers to the variables above: Kubernetes expands it when it starts the container.
    { name: 'OTEL_RESOURCE_ATTRIBUTES', value: 'k8s.pod.name=$(POD_NAME),k8s.namespace.name=$(POD_NAMESPACE),k8s.node.name=$(NODE_NAME)' },
  ];
}

/** Map fields of PodSettings, which an override merges into key by key. */
const MERGED_POD_FIELDS = ['labels', 'annotations', 'nodeSelector'] as const;

/**
 * A service's pod settings on a TemporaGateway: the resource's (spec.pods) with the service's own over them,
 * labels, annotations and nodeSelector key by key and every other field whole, so that an empty list
 * there clears the resource's.
 */
export function mergePodSettings(base: PodSettings | undefined, over: PodSettings | undefined): PodSettings | undefined {
  if (!base || !over) return over ?? base;
  const merged: PodSettings = { ...base, ...over };
  for (const key of MERGED_POD_FIELDS) if (base[key] || over[key]) merged[key] = { ...base[key], ...over[key] };
  return merged;
}

const isEmpty = (v: unknown) =>
  v === undefined || v === '' || (Array.isArray(v) ? v.length === 0 : typeof v === 'object' && v !== null && Object.keys(v).length === 0);

/** The fields of a pod spec that PodSettings sets. */
const SCHEDULING_FIELDS = ['imagePullSecrets', 'nodeSelector', 'tolerations', 'affinity', 'topologySpreadConstraints', 'priorityClassName'] as const;

/**
 * The scheduling and pulling fields of a pod spec, as PodSettings sets them (empty ones left out, so the
 * operator owns no field it has nothing for). A spread constraint without labelSelector would count no
 * pod at all: it spreads the component's own pods instead.
 */
function podScheduling(pods: PodSettings | undefined, selector: Record<string, string>): Pick<PodSpec, (typeof SCHEDULING_FIELDS)[number]> {
  if (!pods) return {};
  const spec: Pick<PodSpec, (typeof SCHEDULING_FIELDS)[number]> = {
    imagePullSecrets: pods.imagePullSecrets,
    nodeSelector: pods.nodeSelector,
    tolerations: pods.tolerations,
    affinity: pods.affinity,
    topologySpreadConstraints: pods.topologySpreadConstraints?.map((c) => (c.labelSelector ? c : { ...c, labelSelector: { matchLabels: selector } })),
    priorityClassName: pods.priorityClassName,
  };
  for (const field of SCHEDULING_FIELDS) if (isEmpty(spec[field])) delete spec[field];
  return spec;
}

export interface PodSpecInput {
  owner: KubeObject;
  component: string;
  image: ImageSpec;
  imageName: string;
  /** Overrides the image's command (which runs the service's HTTP server). */
  command?: string[];
  port?: number;
  /** The variable that tells the process its port: PORT for services, WORKER_PORT for workers. */
  portEnv?: string;
  /** A service's port for /metrics alone (METRICS_PORT); unset, /metrics is on `port` (workers). */
  metricsPort?: number;
  env: EnvVar[];
  envFrom: EnvFromSource[];
  resources: Resources | undefined;
  tracing: TracingSpec | undefined;
  /** Settings the pods read; their hash goes on the template so a settings change rolls the pods. */
  config: Record<string, string> | undefined;
  restartPolicy?: string;
  volumes?: ReadOnlyVolume[];
  /** Scheduling, pulling and extra metadata of the pods; the operator's labels and annotations win over it. */
  pods?: PodSettings;
}

export function podTemplate(input: PodSpecInput): Written<Json<V1PodTemplateSpec>> {
  const { owner, component, port, pods } = input;
  const annotations: Record<string, string> = { ...pods?.annotations };
  if (input.config) {
    annotations['tempora.dev/config-hash'] = createHash('sha256').update(JSON.stringify(input.config)).digest('hex').slice(0, 16);
  }
  const container: Container = {
    name: component,
    image: image(input.image, input.imageName),
    imagePullPolicy: input.image.pullPolicy ?? 'IfNotPresent',
    ...(input.command ? { command: input.command } : {}),
    env: [
      ...(port ? [{ name: input.portEnv ?? 'PORT', value: String(port) }] : []),
      ...(input.metricsPort ? [{ name: 'METRICS_PORT', value: String(input.metricsPort) }] : []),
      { name: 'TEMPORA_DATA_DIR', value: DATA_DIR },
      ...tracingEnv(input.tracing),
      ...input.env,
    ],
    envFrom: input.envFrom,
    resources: input.resources ?? {},
    securityContext: {
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: true,
      capabilities: { drop: ['ALL'] },
    },
    volumeMounts: [
      { name: 'tmp', mountPath: '/tmp' },
      { name: 'data', mountPath: DATA_DIR },
      ...(input.volumes ?? []).map((v) => ({ name: v.name, mountPath: v.mountPath, readOnly: true })),
    ],
  };
  if (port) {
    container.ports = [
      { name: PORT_NAME, containerPort: port, protocol: 'TCP' },
      ...(input.metricsPort ? [{ name: METRICS_PORT_NAME, containerPort: input.metricsPort, protocol: 'TCP' }] : []),
    ];
    // Ready while /health says so (it checks the database and Redis). Alive while the port answers: an
    // unreachable database makes every replica unready, and restarting them would not bring it back. A
    // first start may create the embedded database first, which can take minutes on a busy node.
    container.startupProbe = { tcpSocket: { port: PORT_NAME }, periodSeconds: 2, failureThreshold: 150 };
    container.readinessProbe = { httpGet: { path: '/health', port: PORT_NAME }, periodSeconds: 5 };
    container.livenessProbe = { tcpSocket: { port: PORT_NAME }, periodSeconds: 10, failureThreshold: 6 };
    // A deleted pod leaves its Service's endpoints only once kube-proxy and ingress controllers have seen
    // the change, a second or two after the kubelet stops it: the process keeps serving meanwhile, so
    // that no request is sent to a port that has closed (tested on a real node: test/e2e).
    container.lifecycle = { preStop: { sleep: { seconds: PRE_STOP_SECONDS } } };
  }
  return {
    // The CRDs refuse pod labels that are the operator's; were one to get through, the selectors' still win.
    metadata: { labels: { ...pods?.labels, ...childLabels(owner, component), [OWNER_UID_LABEL]: owner.metadata.uid ?? '' }, annotations },
    spec: {
      ...(input.restartPolicy ? { restartPolicy: input.restartPolicy } : {}),
      ...podScheduling(pods, selectorLabels(owner, component)),
      // The service images run as the node user (uid 1000) of the Node 22 base image.
      securityContext: { runAsNonRoot: true, runAsUser: 1000, runAsGroup: 1000, fsGroup: 1000, seccompProfile: { type: 'RuntimeDefault' } },
      containers: [container],
      volumes: [{ name: 'tmp', emptyDir: {} }, { name: 'data', emptyDir: {} }, ...(input.volumes ?? []).map((v) => ({ name: v.name, ...v.source }))],
    },
  };
}

export function selectorLabels(owner: KubeObject, component: string): Record<string, string> {
  return { 'app.kubernetes.io/name': component, 'app.kubernetes.io/instance': owner.metadata.name };
}

export interface DeploymentInput extends PodSpecInput {
  name: string;
  /** Undefined leaves spec.replicas to others (kubectl scale, an HPA): the operator then never sets it. */
  replicas: number | undefined;
}

export function deployment(input: DeploymentInput): DesiredChild {
  return child(
    R.Deployment,
    { name: input.name, labels: childLabels(input.owner, input.component) },
    {
      spec: {
        ...(input.replicas !== undefined ? { replicas: input.replicas } : {}),
        selector: { matchLabels: selectorLabels(input.owner, input.component) },
        template: podTemplate(input),
      },
    },
  );
}

/** The Service of a platform service: its API on `http` (what an Ingress routes) and its /metrics on `metrics`. */
export function service(owner: KubeObject, name: string, component: string, port: number): DesiredChild {
  return child(
    R.Service,
    { name, labels: childLabels(owner, component) },
    {
      spec: {
        selector: selectorLabels(owner, component),
        ports: [
          { name: PORT_NAME, port, targetPort: PORT_NAME, protocol: 'TCP' },
          { name: METRICS_PORT_NAME, port: port + METRICS_PORT_OFFSET, targetPort: METRICS_PORT_NAME, protocol: 'TCP' },
        ],
      },
    },
  );
}

export function configMap(owner: KubeObject, name: string, component: string, data: Record<string, string>): DesiredChild {
  return child(R.ConfigMap, { name, labels: childLabels(owner, component) }, { data });
}

export function podDisruptionBudget(owner: KubeObject, name: string, component: string, maxUnavailable: number): DesiredChild {
  return child(
    R.PodDisruptionBudget,
    { name, labels: childLabels(owner, component) },
    {
      spec: {
        maxUnavailable,
        selector: { matchLabels: selectorLabels(owner, component) },
      },
    },
  );
}

/** What a monitor scrapes, as the platform names it, and the labels a Prometheus selects monitors by. */
export interface MonitorInput {
  /** The value of COMPONENT_TARGET_LABEL on every series scraped. */
  platformComponent: string;
  monitoring: MonitoringSpec | undefined;
}

/**
 * How the Prometheus Operator scrapes a Tempora pod: /metrics on the named port (a service's `metrics`,
 * which its Service names alike; a worker's `http`), every target labelled with the platform's component.
 */
function metricsEndpoint(platformComponent: string, port: string): MetricsEndpoint {
  return {
    port,
    path: '/metrics',
    interval: '30s',
    relabelings: [{ action: 'replace', targetLabel: COMPONENT_TARGET_LABEL, replacement: platformComponent }],
  };
}

/** The CRDs refuse monitor labels that are the operator's; were one to get through, the operator's still win. */
function monitorLabels(owner: KubeObject, component: string, monitoring: MonitoringSpec | undefined): Record<string, string> {
  return { ...monitoring?.labels, ...childLabels(owner, component) };
}

/** Scrapes the pods behind a Service that service() made. */
export function serviceMonitor(owner: KubeObject, name: string, component: string, monitor: MonitorInput): DesiredChild {
  return child(
    R.ServiceMonitor,
    { name, labels: monitorLabels(owner, component, monitor.monitoring) },
    {
      spec: {
        selector: { matchLabels: { ...selectorLabels(owner, component), [`tempora.dev/${owner.kind.toLowerCase()}`]: owner.metadata.name } },
        endpoints: [metricsEndpoint(monitor.platformComponent, METRICS_PORT_NAME)],
      },
    },
  );
}

/** Scrapes a workload's pods directly, selected by their labels (the workload's own selector): workers have no Service. */
export function podMonitor(owner: KubeObject, name: string, component: string, monitor: MonitorInput): DesiredChild {
  return child(
    R.PodMonitor,
    { name, labels: monitorLabels(owner, component, monitor.monitoring) },
    {
      spec: {
        selector: { matchLabels: selectorLabels(owner, component) },
        podMetricsEndpoints: [metricsEndpoint(monitor.platformComponent, PORT_NAME)],
      },
    },
  );
}

/**
 * A long-running worker (AgentPool, GraphWorker other than daily): its Deployment, serving /health and
 * /metrics on WORKER_PORT, and a PodMonitor for it when the PodMonitor CRD is served (`monitor` given).
 */
export function workerDeployment(input: Omit<DeploymentInput, 'port' | 'portEnv'>, monitor: MonitorInput | undefined): DesiredChild[] {
  const children = [deployment({ ...input, port: WORKER_PORT, portEnv: 'WORKER_PORT' })];
  if (monitor) children.push(podMonitor(input.owner, input.name, input.component, monitor));
  return children;
}

/** A child's metadata as the operator sets it; childObject adds its namespace, owner and spec hash. */
interface ChildMeta {
  name: string;
  labels: Record<string, string>;
  annotations?: Record<string, string>;
}

/**
 * A child of the resource's kind: `fields` are typed by the kind as the operator writes it, so that a
 * field the kind does not have, or a value of another type, does not compile. apiVersion and kind are
 * left to childObject, which takes them from the resource.
 */
export function child<T extends KubeObject>(resource: R.ResourceType<T>, metadata: ChildMeta, fields: NoInfer<ChildFields<T>>): DesiredChild {
  return { resource, object: { apiVersion: '', kind: '', metadata, ...fields } };
}
