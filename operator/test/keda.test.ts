// An AgentPool under KEDA, against a real kube-apiserver and kube-controller-manager: KEDA's ScaledObject kind
// is KEDA's own CRD, whose schema the API server holds every ScaledObject to (KEDA itself runs on the real node,
// test/e2e/autoscaling.test.ts), so what is shown here is
// what the operator writes and reads: a ScaledObject on queue depth instead of its own HPA while KEDA is
// installed and the pool names its Prometheus, and the pool's counts from the HPA KEDA makes.
import assert from 'node:assert/strict';
import { crds as kedaCrds } from '../../test/k8s/keda.ts';
import { waitFor } from '../../test/support/wait.ts';
import type { KubeClient } from '../src/kube/client.ts';
import type { KubeObject } from '../src/kube/object.ts';
import * as R from '../src/kube/resources.ts';
import { kedaHpaName, QUEUE_DEPTH_METRIC } from '../src/reconcilers/agent-pool.ts';
import { applyAs, type OperatorCluster, ownedBy, startOperatorCluster, stopOperatorCluster, waitReady } from './cluster.ts';
import { agentPool, externalMetricsApi, gateway, NS } from './fixtures.ts';

const CRD: R.ResourceType = { group: 'apiextensions.k8s.io', version: 'v1', kind: 'CustomResourceDefinition', plural: 'customresourcedefinitions' };
const APIService: R.ResourceType = { group: 'apiregistration.k8s.io', version: 'v1', kind: 'APIService', plural: 'apiservices' };
/** KEDA's metrics server as KEDA registers it. */
const kedaMetricsApi = externalMetricsApi('keda', 'keda-operator-metrics-apiserver');
const PROMETHEUS = 'http://prometheus.monitoring.svc:9090';

describe('AgentPool under KEDA', function () {
  this.timeout(120_000);
  let scaledObjectCrd: KubeObject;
  let cluster: OperatorCluster;
  let admin: KubeClient;

  before(async function () {
    // A clean machine builds kube-apiserver and kube-controller-manager first (minutes, once).
    this.timeout(1_800_000);
    // KEDA's own ScaledObject CRD (v2.21.0, from its Go module), so every ScaledObject the operator applies meets
    // its schema; read here, not when mocha loads the file, as it asks the go command.
    scaledObjectCrd = kedaCrds().find((crd) => (crd as KubeObject).metadata.name === 'scaledobjects.keda.sh') as KubeObject;
    cluster = await startOperatorCluster('operator-keda');
    admin = cluster.admin;
    await applyAs(admin, gateway('alpha'));
    await applyAs(admin, agentPool('agents', { gatewayRef: 'alpha' }));
    await waitFor('the HPA of its own', () => admin.getOrUndefined(R.HorizontalPodAutoscaler, NS, 'agents'), { timeoutMs: 30_000 });
  });

  after(async function () {
    this.timeout(60_000);
    await stopOperatorCluster(cluster ?? {});
  });

  const pool = () => admin.get(R.AgentPool, NS, 'agents');
  const scaledObjects = async () => ownedBy(admin, R.ScaledObject, await pool(), NS);
  const hpaMetrics = async () => (await admin.get(R.HorizontalPodAutoscaler, NS, 'agents')).spec?.metrics ?? [];

  it('keeps its own HPA, on CPU alone, while KEDA is installed but the pool names no Prometheus', async function () {
    await applyAs(admin, scaledObjectCrd);
    // KEDA's external metrics API serves its ScaledObjects' metrics only: the queue-depth metric is not asked of it.
    await applyAs(admin, kedaMetricsApi);
    await waitFor('the ScaledObject kind served', () => admin.serves('keda.sh/v1alpha1', 'scaledobjects'));
    // The operator probes optional APIs every second (newOperator): a reconcile after that has seen KEDA.
    await applyAs(admin, agentPool('agents', { gatewayRef: 'alpha', concurrency: 4 }));
    await waitFor('the reconcile after KEDA appeared', async () => (await admin.get(R.ConfigMap, NS, 'agents')).data?.AGENT_POOL_CONCURRENCY === '4');
    // A probe between the metrics API's registration and the CRD's being served sees a metrics adapter and no
    // KEDA, and its answer stands for a second: the HPA may scale on queue depth until the next probe.
    await waitFor('its own HPA on CPU alone', async () => {
      const metrics = await hpaMetrics();
      return metrics.length === 1 && metrics[0]!.type === 'Resource';
    });
    assert.deepEqual(await scaledObjects(), []);
  });

  it('gets a ScaledObject on queue depth in place of its own HPA once it names its Prometheus', async function () {
    await applyAs(admin, agentPool('agents', { gatewayRef: 'alpha', autoscaling: { prometheusAddress: PROMETHEUS, scaleDownStabilizationSeconds: 30 } }));
    const [scaled] = await waitFor('the ScaledObject', async () => {
      const found = await scaledObjects();
      return found.length === 1 && found;
    });
    assert.deepEqual(scaled!.spec, {
      scaleTargetRef: { apiVersion: 'apps/v1', kind: 'Deployment', name: 'agents' },
      minReplicaCount: 2,
      maxReplicaCount: 6,
      advanced: { horizontalPodAutoscalerConfig: { behavior: { scaleDown: { stabilizationWindowSeconds: 30 } } } },
      // The fixture's pods request no CPU, so CPU is no trigger: a failing one would keep KEDA from scaling down.
      triggers: [
        {
          type: 'prometheus',
          metricType: 'AverageValue',
          metadata: { serverAddress: PROMETHEUS, query: `max(${QUEUE_DEPTH_METRIC}{namespace="${NS}",pool="agents"})`, threshold: '20' },
        },
      ],
    });
    assert.equal(scaled!.metadata.labels?.['app.kubernetes.io/managed-by'], 'tempora-operator');
    await waitFor('its own HPA gone', async () => !(await admin.getOrUndefined(R.HorizontalPodAutoscaler, NS, 'agents')));
  });

  it("counts the replicas KEDA's HPA wants", async function () {
    const [scaled] = await scaledObjects();
    // What KEDA makes for the ScaledObject, its labels copied. Below its minimum the kube-controller-manager's
    // HPA controller scales the Deployment to 3 without reading a metric.
    await applyAs(admin, {
      apiVersion: 'autoscaling/v2',
      kind: 'HorizontalPodAutoscaler',
      metadata: { name: kedaHpaName('agents'), namespace: NS, labels: { ...scaled!.metadata.labels, 'scaledobject.keda.sh/name': 'agents' } },
      spec: { scaleTargetRef: { apiVersion: 'apps/v1', kind: 'Deployment', name: 'agents' }, minReplicas: 3, maxReplicas: 3 },
    });
    const status = await waitFor(
      "the pool's counts from KEDA's HPA",
      async () => {
        const s = (await pool()).status;
        return s?.desiredReplicas === 3 && s.replicas === 3 && s;
      },
      { timeoutMs: 60_000 },
    );
    assert.equal(status.desiredReplicas, 3);
    await admin.delete(R.HorizontalPodAutoscaler, NS, kedaHpaName('agents'));
  });

  it('scales on CPU too where the pods request CPU, and the stabilization defaults to five minutes', async function () {
    await applyAs(
      admin,
      agentPool('agents', { gatewayRef: 'alpha', autoscaling: { prometheusAddress: PROMETHEUS }, resources: { requests: { cpu: '100m' } } }),
    );
    const spec = await waitFor('a cpu trigger', async () => {
      const [so] = await scaledObjects();
      return so?.spec?.triggers.length === 2 && so.spec;
    });
    assert.deepEqual(spec.triggers[1], { type: 'cpu', metricType: 'Utilization', metadata: { value: '70' } });
    assert.equal(spec.advanced?.horizontalPodAutoscalerConfig?.behavior?.scaleDown?.stabilizationWindowSeconds, 300);
  });

  it('goes back to its own HPA when the pool stops naming a Prometheus, the ScaledObject deleted', async function () {
    // KEDA's CRD came after the operator started: ScaledObjects are not watched, and this one is deleted all the same.
    await applyAs(admin, agentPool('agents', { gatewayRef: 'alpha' }));
    await waitFor('the ScaledObject gone', async () => (await scaledObjects()).length === 0, { timeoutMs: 30_000 });
    await waitFor('its own HPA back', () => admin.getOrUndefined(R.HorizontalPodAutoscaler, NS, 'agents'), { timeoutMs: 30_000 });
    assert.equal((await hpaMetrics()).length, 1, 'cpu only');
    await applyAs(admin, agentPool('agents', { gatewayRef: 'alpha', autoscaling: { prometheusAddress: PROMETHEUS } }));
    await waitFor('the ScaledObject again', async () => (await scaledObjects()).length === 1);
  });

  it('refuses a Prometheus address that is not an http(s) URL', async function () {
    await assert.rejects(applyAs(admin, agentPool('bad', { gatewayRef: 'alpha', autoscaling: { prometheusAddress: 'prometheus:9090' } })), /prometheusAddress/);
  });

  it('goes back to its own HPA once KEDA is gone', async function () {
    await admin.delete(APIService, '', kedaMetricsApi.metadata.name);
    await admin.delete(CRD, '', scaledObjectCrd.metadata.name);
    const hpa = await waitFor('its own HPA back', () => admin.getOrUndefined(R.HorizontalPodAutoscaler, NS, 'agents'), { timeoutMs: 30_000 });
    assert.equal(hpa.spec?.behavior?.scaleDown?.stabilizationWindowSeconds, 300, "the pool's scale-down stabilization, as KEDA's HPA had it");
    await waitReady(admin, R.AgentPool, NS, 'agents');
  });
});
