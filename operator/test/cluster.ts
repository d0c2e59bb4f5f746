// Shared set-up for the tests that need a cluster: one control plane per mocha run, the CRDs and RBAC
// from crds/, and helpers to act as a user would.
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments } from 'yaml';
import { ControlPlane } from '../../test/k8s/control-plane.ts';
import { waitFor } from '../../test/support/wait.ts';
import type { Condition } from '../src/api/v1alpha1/index.ts';
import type { OperatorConfig } from '../src/config.ts';
import { KubeClient } from '../src/kube/client.ts';
import { loadConnection } from '../src/kube/connection.ts';
import type { KubeObject } from '../src/kube/object.ts';
import { objectPath, PodMonitor, type ResourceType, ServiceMonitor } from '../src/kube/resources.ts';
import { createLogger } from '../src/log.ts';
import { Operator } from '../src/operator.ts';
import { KubeletStandIn } from './kubelet-stand-in.ts';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const CRD_DIR = join(ROOT, 'crds');
/** Stands in for one of the Prometheus Operator's CRDs: the kind, with an open schema. */
function standInCrd(r: ResourceType): KubeObject {
  const singular = r.kind.toLowerCase();
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: `${r.plural}.${r.group}` },
    spec: {
      group: r.group,
      scope: 'Namespaced',
      names: { kind: r.kind, plural: r.plural, singular, listKind: `${r.kind}List` },
      versions: [
        {
          name: r.version,
          served: true,
          storage: true,
          schema: { openAPIV3Schema: { type: 'object', properties: { spec: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true } } } },
        },
      ],
    },
  };
}
export const SERVICE_MONITOR_CRD = standInCrd(ServiceMonitor);
export const POD_MONITOR_CRD = standInCrd(PodMonitor);
export const OPERATOR_USER = 'system:serviceaccount:tempora-system:tempora-operator';
/** A ServiceAccount token's groups, which also put the operator in API priority and fairness's service-accounts flow. */
const OPERATOR_GROUPS = ['system:serviceaccounts', 'system:serviceaccounts:tempora-system'];

export function manifests(file: string): KubeObject[] {
  return parseAllDocuments(readFileSync(file, 'utf8'))
    .map((d): KubeObject | null => d.toJS())
    .filter((d): d is KubeObject => d !== null);
}

export function clientFor(kubeconfigPath: string): KubeClient {
  return new KubeClient(loadConnection(kubeconfigPath));
}

const PLURALS: Record<string, string> = {
  CustomResourceDefinition: 'customresourcedefinitions',
  ServiceAccount: 'serviceaccounts',
  ClusterRole: 'clusterroles',
  ClusterRoleBinding: 'clusterrolebindings',
  Role: 'roles',
  RoleBinding: 'rolebindings',
  Namespace: 'namespaces',
  APIService: 'apiservices',
};

function resourceOf(obj: KubeObject, plural?: string): ResourceType {
  const [group, version] = obj.apiVersion.includes('/') ? obj.apiVersion.split('/') : ['', obj.apiVersion];
  return { group: group!, version: version!, kind: obj.kind, plural: plural ?? PLURALS[obj.kind] ?? `${obj.kind.toLowerCase()}s` };
}

/** Server-side apply as a user would (`kubectl apply --server-side`), under another field manager. */
export function applyAs<T extends KubeObject>(client: KubeClient, obj: T, manager = 'test-user', plural?: string): Promise<T> {
  const r = resourceOf(obj, plural);
  const namespaced = !['CustomResourceDefinition', 'ClusterRole', 'ClusterRoleBinding', 'Namespace', 'APIService'].includes(obj.kind);
  const path = objectPath(r, namespaced ? (obj.metadata.namespace ?? 'default') : '', obj.metadata.name);
  return client.request('PATCH', path, {
    body: obj,
    contentType: 'application/apply-patch+yaml',
    query: { fieldManager: manager, force: 'true' },
  });
}

/** A custom resource (api/v1alpha1): its status has conditions. */
export type WithConditions = KubeObject & { status?: { observedGeneration?: number; conditions?: Condition[] } };

export function condition(obj: WithConditions | undefined, type: string): Condition | undefined {
  return (obj?.status?.conditions ?? []).find((c) => c.type === type);
}

/** Waits until the custom resource reports Ready for its current generation. */
export function waitReady<T extends WithConditions>(
  client: KubeClient,
  resource: ResourceType<T>,
  namespace: string,
  name: string,
  timeoutMs = 30_000,
): Promise<T> {
  return waitFor(
    `${resource.kind} ${name} Ready at its current generation`,
    async () => {
      const obj = await client.get(resource, namespace, name);
      const ready = condition(obj, 'Ready');
      return ready?.status === 'True' && ready.observedGeneration === obj.metadata.generation && obj.status?.observedGeneration === obj.metadata.generation
        ? obj
        : undefined;
    },
    { timeoutMs },
  );
}

/** The objects of a type in the namespace that name `owner` in an owner reference. */
export async function ownedBy<T extends KubeObject>(client: KubeClient, resource: ResourceType<T>, owner: KubeObject, namespace: string): Promise<T[]> {
  const list = await client.list(resource, {}, namespace);
  return list.items.filter((o) => o.metadata.ownerReferences?.some((r) => r.uid === owner.metadata.uid));
}

export interface Cluster {
  cp: ControlPlane;
  admin: KubeClient;
  operatorKubeconfig: string;
}

export async function startCluster(): Promise<Cluster> {
  const cp = new ControlPlane();
  try {
    let cluster: Cluster | undefined;
    await cp.start(async () => {
      cluster = await installTempora(cp);
    });
    return cluster!;
  } catch (err) {
    await cp.stop();
    throw err;
  }
}

async function installTempora(cp: ControlPlane): Promise<Cluster> {
  const admin = clientFor(cp.kubeconfigPath);
  await applyAs(admin, { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'tempora-system' } });
  for (const file of readdirSync(CRD_DIR).filter((f) => f.endsWith('.yaml'))) {
    for (const m of manifests(join(CRD_DIR, file))) await applyAs(admin, m);
  }
  for (const m of manifests(join(CRD_DIR, 'rbac', 'operator.yaml'))) await applyAs(admin, m);
  // Stand in for the Prometheus Operator's CRDs, so that ServiceMonitor and PodMonitor children are created.
  const monitorCrds = [SERVICE_MONITOR_CRD, POD_MONITOR_CRD];
  for (const crd of monitorCrds) await applyAs(admin, crd);
  for (const crdName of ['temporagateways', 'graphworkers', 'agentpools', 'simulationbudgets']
    .map((p) => `${p}.tempora.dev`)
    .concat(monitorCrds.map((c) => c.metadata.name))) {
    await waitFor(
      `CRD ${crdName} established`,
      async () => {
        const crd = await admin.request<{ status?: { conditions?: { type: string; status: string }[] } }>(
          'GET',
          `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${crdName}`,
        );
        return (crd.status?.conditions ?? []).some((c) => c.type === 'Established' && c.status === 'True');
      },
      { timeoutMs: 30_000 },
    );
  }
  // The operator runs as its ServiceAccount's user, so the tests also prove the RBAC manifests suffice.
  return { cp, admin, operatorKubeconfig: cp.kubeconfigFor(OPERATOR_USER, 'operator.kubeconfig', OPERATOR_GROUPS) };
}

/** A control plane whose pods the kubelet stand-in reports on, and an operator leading on it. */
export interface OperatorCluster extends Cluster {
  kubelet: KubeletStandIn;
  op: Operator;
}

export async function startOperatorCluster(identity: string, overrides: Partial<OperatorConfig> = {}): Promise<OperatorCluster> {
  const cluster = await startCluster();
  const kubelet = new KubeletStandIn(cluster.admin);
  kubelet.start();
  const op = newOperator(cluster.operatorKubeconfig, identity, overrides);
  await op.start();
  await waitFor(`${identity} to lead`, async () => op.isLeader, { timeoutMs: 20_000 });
  return { ...cluster, kubelet, op };
}

/** Stops what startOperatorCluster started; `op` is the operator running now (a test may have replaced it). */
export async function stopOperatorCluster(parts: Partial<OperatorCluster>): Promise<void> {
  await parts.op?.stop();
  await parts.kubelet?.stop();
  await parts.cp?.stop();
}

export function operatorConfig(identity: string, overrides: Partial<OperatorConfig> = {}): OperatorConfig {
  return {
    kubeconfig: undefined,
    port: 0,
    watchNamespace: undefined,
    leaderElection: true,
    leaderElectionNamespace: 'tempora-system',
    leaderElectionId: 'tempora-operator',
    identity,
    workers: 4,
    resyncMs: 0,
    logLevel: process.env.OPERATOR_TEST_LOG_LEVEL ?? 'silent',
    serviceUrlTemplate: 'http://{service}.{namespace}.svc:{port}',
    budgetPollMs: 30_000,
    ...overrides,
  };
}

export function newOperator(kubeconfigPath: string, identity: string, overrides: Partial<OperatorConfig> = {}): Operator {
  const config = operatorConfig(identity, overrides);
  // Optional APIs are probed every second, so a test that registers one sees the operator react quickly.
  return new Operator({ config, connection: loadConnection(kubeconfigPath), log: createLogger(config.logLevel, { identity }), featureTtlMs: 1000 });
}

/** Sum of a counter's values, optionally only for label sets the filter accepts. */
export async function counterSum(
  op: Operator,
  name: string,
  filter: (labels: Partial<Record<string, string | number>>) => boolean = () => true,
): Promise<number> {
  const metric = op.metrics.registry.getSingleMetric(name);
  if (!metric) return 0;
  const { values } = await metric.get();
  return values.filter((v) => filter(v.labels)).reduce((n, v) => n + v.value, 0);
}
