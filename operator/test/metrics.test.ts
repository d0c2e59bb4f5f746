// The operator's own series, as a Prometheus scraping a fresh operator sees them: every one whose label
// values are known when it starts is there at 0, so no panel or alert reads "no data" for "none happened".
import assert from 'node:assert/strict';
import { Agent } from 'node:https';
import { assertZeroed } from '../../services/kit/test/metrics-support.ts';
import { waitFor } from '../../test/support/wait.ts';
import type { Connection } from '../src/kube/connection.ts';
import * as R from '../src/kube/resources.ts';
import { createLogger } from '../src/log.ts';
import { createMetrics } from '../src/metrics.ts';
import { Operator } from '../src/operator.ts';
import { counterSum, operatorConfig } from './cluster.ts';

/** Nothing listens there: the operator is built, never started, so it sends no request. */
const nowhere: Connection = { server: 'https://127.0.0.1:9', agent: new Agent(), watchAgent: new Agent(), headers: async () => ({}) };
const newOperator = () => new Operator({ config: operatorConfig('metrics'), connection: nowhere, log: createLogger('silent') });

/** One controller per custom resource kind, and the one filling the Secrets whose keys the operator generates. */
const CONTROLLERS = ['temporagateway', 'graphworker', 'agentpool', 'simulationbudget', 'secret'];
const CUSTOM = [R.TemporaGateway, R.GraphWorker, R.AgentPool, R.SimulationBudget];
/** What the informers watch before start-up probes the optional APIs (ServiceMonitors and PodMonitors are watched when served). */
const WATCHED = [...CUSTOM, ...R.WATCHED_CHILDREN, R.Pod].map((r) => r.plural);
const CHILDREN = [...R.WATCHED_CHILDREN, ...R.OPTIONAL_CHILDREN].map((r) => r.plural);

describe('operator metrics', function () {
  it('exports every series whose labels are known when it starts at 0', async function () {
    const { registry } = newOperator().metrics;
    const controller = { controller: CONTROLLERS };
    await assertZeroed(registry, 'controller_runtime_reconcile_total', { ...controller, result: ['success', 'requeue_after', 'error'] });
    await assertZeroed(registry, 'controller_runtime_reconcile_errors_total', controller);
    await assertZeroed(registry, 'controller_runtime_reconcile_time_seconds', controller);
    await assertZeroed(registry, 'controller_runtime_active_workers', controller);
    for (const name of [
      'workqueue_depth',
      'workqueue_adds_total',
      'workqueue_retries_total',
      'workqueue_queue_duration_seconds',
      'workqueue_work_duration_seconds',
    ]) {
      await assertZeroed(registry, name, { name: CONTROLLERS });
    }
    await assertZeroed(registry, 'tempora_operator_informer_relists_total', { resource: WATCHED, reason: ['initial', 'gone', 'error'] });
    await assertZeroed(registry, 'tempora_operator_informer_restarts_total', { resource: WATCHED });
    await assertZeroed(
      registry,
      'tempora_operator_api_writes_total',
      { verb: ['patch', 'delete'], resource: CHILDREN },
      { verb: ['patch'], resource: CUSTOM.map((r) => `${r.plural}/status`) },
      { verb: ['post'], resource: ['secrets', 'events', 'leases'] },
      { verb: ['put'], resource: ['leases'] },
    );
    // A standby says it does not lead; only the leader's series reads 1.
    await assertZeroed(registry, 'leader_election_master_status', { name: ['tempora-operator'] });
    // Which Secrets and certificates a TemporaGateway names is known only from the TemporaGateway.
    await assertZeroed(registry, 'tempora_operator_secret_missing');
    await assertZeroed(registry, 'tempora_operator_certificate_expiry_timestamp_seconds');
  });

  it('exports the writes it can send at 0 from a fresh registry, each counted from there', async function () {
    const metrics = createMetrics();
    metrics.apiWrites.inc({ verb: 'patch', resource: 'deployments' });
    const { values } = await metrics.apiWrites.get();
    assert.equal(values.find((v) => v.labels.verb === 'patch' && v.labels.resource === 'deployments')?.value, 1);
    assert.equal(values.filter((v) => v.value !== 0).length, 1, 'the other series stay at 0');
  });

  it('keeps what a controller counted when its queue is made anew, as after leadership regained', async function () {
    const op = newOperator();
    const controller = op.controllers.find((c) => c.name === 'graphworker')!;
    const count = async (name: string) =>
      (await op.metrics.registry.getSingleMetric(name)!.get()).values.find(
        (v) => 'metricName' in v && v.metricName === `${name}_count` && (v.labels.controller ?? v.labels.name) === 'graphworker',
      )?.value;
    controller.startWorkers();
    // Not in the (unstarted) cache: reconciled as gone, a success.
    controller.queue.add('default/gone');
    await waitFor(
      'the key reconciled',
      async () => (await counterSum(op, 'controller_runtime_reconcile_total', (l) => l.controller === 'graphworker' && l.result === 'success')) === 1,
      { timeoutMs: 30_000 },
    );
    await controller.stop();
    controller.startWorkers();
    await controller.stop();
    assert.equal(await count('controller_runtime_reconcile_time_seconds'), 1, 'reconcile time kept');
    assert.equal(await count('workqueue_work_duration_seconds'), 1, 'work duration kept');
    assert.equal(await counterSum(op, 'workqueue_adds_total', (l) => l.name === 'graphworker'), 1, 'adds kept');
  });
});
