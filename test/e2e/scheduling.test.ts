// Scheduling and pulling on the real node, where the kube-scheduler (not a stand-in) decides where a pod
// goes: an AgentPool whose spec.pods names a registry's pull Secret and a node selector no node has gets a
// pod that carries the Secret and stays Pending, Unschedulable in the scheduler's words, and the pool's
// Ready and Degraded say why; given a selector the node has, its pod is placed there, runs, and the pool is
// Ready. An AgentPool because its pods need only Redis (on the host); the operator runs in the test's
// process as its ServiceAccount's user, as in operator/test (the image of it is platform.test.ts's).
//
// The node needs Linux, root and cgroups; elsewhere the suite is skipped and says why.
import assert from 'node:assert/strict';
import type { KubeClient } from '../../operator/src/kube/client.ts';
import type { KubeObject } from '../../operator/src/kube/object.ts';
import * as R from '../../operator/src/kube/resources.ts';
import type { Operator } from '../../operator/src/operator.ts';
import { OWNER_UID_LABEL } from '../../operator/src/reconcilers/context.ts';
import { applyAs, condition, waitReady } from '../../operator/test/cluster.ts';
import { type KubeNode, NODE_NAME, skipWithoutNode } from '../k8s/node.ts';
import { waitFor } from '../support/wait.ts';
import { POD_RESOURCES } from './platform.ts';
import { NOWHERE, startOperatorOnNode, startPoolNode } from './pool-node.ts';

const NS = 'tempora-scheduling';
const TAG = 'scheduling';
const image = { registry: 'local', version: TAG, pullPolicy: 'Never' };
const PULL_SECRET = 'registry-example';

interface PodCondition {
  type: string;
  status: string;
  reason?: string;
  message?: string;
}
const podCondition = (pod: KubeObject, type: string) => ((pod.status?.conditions ?? []) as PodCondition[]).find((c) => c.type === type);
type PodSpec = { imagePullSecrets?: { name: string }[]; nodeSelector?: Record<string, string>; nodeName?: string };

const pool = (nodeSelector: Record<string, string>): KubeObject => ({
  apiVersion: 'tempora.dev/v1alpha1',
  kind: 'AgentPool',
  metadata: { name: 'agents', namespace: NS },
  spec: {
    gatewayRef: 'tempora',
    image,
    minReplicas: 1,
    maxReplicas: 1,
    models: { presets: [{ name: 'balanced', provider: 'offline', model: 'offline' }], policy: { default: 'balanced' } },
    resources: POD_RESOURCES,
    pods: { imagePullSecrets: [{ name: PULL_SECRET }], nodeSelector },
  },
});

describe('scheduling and pulling on the real node', function () {
  this.timeout(180_000);
  let node: KubeNode;
  let admin: KubeClient;
  let op: Operator | undefined;
  let redis: { stop(): Promise<void> } | undefined;

  before(async function () {
    skipWithoutNode(this);
    this.timeout(30 * 60_000);
    ({ node, admin, redis } = await startPoolNode(NS, TAG));
    // A private registry's credentials, as `kubectl create secret docker-registry` makes them. The image is
    // local (pullPolicy Never), so the kubelet never uses them: what is shown is that they reach the pod.
    const auth = Buffer.from('robot:token').toString('base64');
    await applyAs(admin, {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: PULL_SECRET, namespace: NS },
      type: 'kubernetes.io/dockerconfigjson',
      stringData: { '.dockerconfigjson': JSON.stringify({ auths: { 'registry.example.com': { auth } } }) },
    } as KubeObject);
    op = await startOperatorOnNode(node, admin, NS, TAG);
  });

  afterEach(async function () {
    if (this.currentTest?.state === 'failed' && node) process.stderr.write(`${await node.report(NS)}\n`);
  });

  after(async function () {
    this.timeout(120_000);
    await op?.stop();
    await redis?.stop();
    await node?.stop();
  });

  const poolPods = async (uid: string) =>
    (await admin.list(R.Pod, { labelSelector: `${OWNER_UID_LABEL}=${uid}` }, NS)).items.filter((p) => !p.metadata.deletionTimestamp);

  it('gives the pod the pull secret, leaves it Pending when no node matches, and says why in Ready and Degraded', async function () {
    const applied = await applyAs(admin, pool(NOWHERE));
    const [pending] = await waitFor(
      "the pool's pod turned down by the scheduler",
      async () => {
        const pods = await poolPods(applied.metadata.uid!);
        return pods.length > 0 && pods.every((p) => podCondition(p, 'PodScheduled')?.reason === 'Unschedulable') ? pods : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 250 },
    );
    const spec = pending!.spec as PodSpec;
    assert.deepEqual(spec.imagePullSecrets, [{ name: PULL_SECRET }], 'the pull secret in the pod spec');
    assert.deepEqual(spec.nodeSelector, NOWHERE);
    assert.equal(spec.nodeName, undefined, 'on no node');
    assert.equal(pending!.status?.phase, 'Pending');
    const scheduled = podCondition(pending!, 'PodScheduled')!;
    assert.equal(scheduled.status, 'False');
    assert.match(scheduled.message ?? '', /^0\/1 nodes are available: 1 node\(s\) didn't match Pod's node affinity\/selector/, "the scheduler's words");

    const stuck = await waitFor(
      'the pool Degraded, Unschedulable',
      async () => {
        const obj = await admin.get(R.AgentPool, NS, 'agents');
        const degraded = condition(obj, 'Degraded');
        return degraded?.status === 'True' && degraded.reason === 'Unschedulable' && degraded.observedGeneration === obj.metadata.generation ? obj : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 250 },
    );
    const degraded = condition(stuck, 'Degraded')!;
    assert.ok(
      degraded.message.includes(`pod ${pending!.metadata.name}: Unschedulable: ${scheduled.message}`),
      `Degraded names the pod and the scheduler's message: ${degraded.message}`,
    );
    const ready = condition(stuck, 'Ready')!;
    assert.deepEqual([ready.status, ready.reason], ['False', 'Unschedulable']);
    // Still waiting: nothing on the node takes it.
    const [still] = await poolPods(applied.metadata.uid!);
    assert.deepEqual([still!.metadata.name, still!.status?.phase], [pending!.metadata.name, 'Pending']);
  });

  it('places the pod on the node once the selector matches it: running, with the pull secret, the pool Ready', async function () {
    const labels = (await admin.request<KubeObject>('GET', `/api/v1/nodes/${NODE_NAME}`)).metadata.labels ?? {};
    const here = { 'kubernetes.io/hostname': labels['kubernetes.io/hostname']! };
    assert.ok(here['kubernetes.io/hostname'], 'the node has its hostname label');
    await applyAs(admin, pool(here));
    const ready = await waitReady(admin, R.AgentPool, NS, 'agents', 120_000);
    assert.equal(condition(ready, 'Degraded')?.status, 'False');
    const pods = await poolPods(ready.metadata.uid!);
    assert.equal(pods.length, 1, 'the Pending pod replaced');
    const [pod] = pods;
    const spec = pod!.spec as PodSpec;
    assert.deepEqual([spec.nodeName, pod!.status?.phase], [NODE_NAME, 'Running']);
    assert.deepEqual(spec.imagePullSecrets, [{ name: PULL_SECRET }]);
    assert.equal(podCondition(pod!, 'PodScheduled')?.status, 'True');
  });
});
