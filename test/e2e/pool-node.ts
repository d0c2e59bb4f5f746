// What the node tests of a lone AgentPool share (scheduling.test.ts, autoscaling.test.ts): the CRDs and the
// operator's RBAC, the pool's Redis on the host, and the operator running as its ServiceAccount beside a
// TemporaGateway whose own pods are kept off the node.
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import type { KubeClient } from '../../operator/src/kube/client.ts';
import type { KubeObject } from '../../operator/src/kube/object.ts';
import type { Operator } from '../../operator/src/operator.ts';
import { applyAs, CRD_DIR, clientFor, manifests, newOperator, OPERATOR_USER } from '../../operator/test/cluster.ts';
import { startRedis } from '../../scripts/infra.ts';
import { KubeNode, NODE_ADDRESS } from '../k8s/node.ts';

/** No node has this label: the scheduler can place no pod that requires it. */
export const NOWHERE = { 'example.com/node-pool': 'gpu' };

/**
 * A node with the generation image built under `tag`, the operator's kinds installed (installOperatorKinds) and
 * the pool's Redis (poolRedis) for an AgentPool in `namespace`.
 */
export async function startPoolNode(
  namespace: string,
  tag: string,
): Promise<{ node: KubeNode; admin: KubeClient; redis: { url: string; stop(): Promise<void> } }> {
  const node = await KubeNode.start();
  try {
    const admin = clientFor(node.kubeconfigPath);
    await node.buildImage({ dockerfile: 'services/generation/Dockerfile', name: 'generation', tag });
    await installOperatorKinds(node, admin, namespace);
    return { node, admin, redis: await poolRedis(node, admin, namespace) };
  } catch (error) {
    // The caller's after() never learns of a node it was not given: stopped here, so the next suite can start one.
    await node.stop();
    throw error;
  }
}

/** The CRDs, the operator's namespace and RBAC, and `namespace` with its default ServiceAccount. */
async function installOperatorKinds(node: KubeNode, admin: KubeClient, namespace: string): Promise<void> {
  for (const file of readdirSync(CRD_DIR).filter((f) => f.endsWith('.yaml'))) for (const m of manifests(join(CRD_DIR, file))) await applyAs(admin, m);
  // The operator's ServiceAccount lives in tempora-system, the pool in a namespace of its own.
  for (const name of ['tempora-system', namespace]) await applyAs(admin, { apiVersion: 'v1', kind: 'Namespace', metadata: { name } });
  for (const m of manifests(join(CRD_DIR, 'rbac', 'operator.yaml'))) await applyAs(admin, m);
  await node.waitForServiceAccount(namespace);
}

/** A Redis on the host, reached by the pods through the Secret `tempora-redis` (key `url`). */
async function poolRedis(node: KubeNode, admin: KubeClient, namespace: string): Promise<{ url: string; stop(): Promise<void> }> {
  const redis = await startRedis({ host: NODE_ADDRESS });
  const service = await node.exposeHostPort('redis', Number(new URL(redis.url).port), namespace);
  await applyAs(admin, {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name: 'tempora-redis', namespace },
    stringData: { url: `redis://${service}` },
  } as KubeObject);
  return redis;
}

/**
 * The operator, as its ServiceAccount, watching `namespace`, and the pool's TemporaGateway `tempora`: its Redis
 * is the pool's; its own pods are kept off the node (their images are not built here) and wait, concerning the
 * pool no more than its Degraded does.
 */
export async function startOperatorOnNode(node: KubeNode, admin: KubeClient, namespace: string, tag: string): Promise<Operator> {
  const kubeconfig = node.controlPlane.kubeconfigFor(OPERATOR_USER, 'operator.kubeconfig', ['system:serviceaccounts', 'system:serviceaccounts:tempora-system']);
  const op = newOperator(kubeconfig, tag, { leaderElection: false, watchNamespace: namespace });
  await op.start();
  await applyAs(admin, {
    apiVersion: 'tempora.dev/v1alpha1',
    kind: 'TemporaGateway',
    metadata: { name: 'tempora', namespace },
    spec: { image: { registry: 'local', version: tag, pullPolicy: 'Never' }, redis: { secretName: 'tempora-redis' }, pods: { nodeSelector: NOWHERE } },
  });
  return op;
}
