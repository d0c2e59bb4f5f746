import assert from 'node:assert/strict';
import type { Deployment, Pod } from '../src/kube/object.ts';
import type { AppliedChildren } from '../src/reconcilers/apply-children.ts';
import { podProblems, readiness } from '../src/reconcilers/readiness.ts';
import { nodeReport } from './kubelet-stand-in.ts';

interface Rollout {
  wanted?: number;
  replicas?: number;
  updated?: number;
  available?: number;
}

const deployment = (generation: number, observedGeneration: number, r: Rollout = {}): Deployment => {
  const wanted = r.wanted ?? 2;
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name: 'agents', generation },
    spec: { replicas: wanted, selector: {}, template: {} },
    status: { observedGeneration, replicas: r.replicas ?? wanted, updatedReplicas: r.updated ?? wanted, availableReplicas: r.available ?? wanted },
  };
};

const applied = (d: Deployment, observeAt?: number): AppliedChildren => ({
  live: new Map([['deployments/agents', d]]),
  errors: [],
  wroteWatched: false,
  observeAt: new Map(observeAt === undefined ? [] : [['deployments/agents', observeAt]]),
});

const pod = (name: string, image: string): Pod => {
  const p: Pod = { apiVersion: 'v1', kind: 'Pod', metadata: { name }, spec: { containers: [{ name: 'gateway', image }] } };
  return { ...p, status: nodeReport(p) };
};

const conditionOf = (r: ReturnType<typeof readiness>, type: string) => r.conditions.find((c) => c.type === type)!;

describe('readiness', function () {
  it('waits for the deployment controller to observe what the operator applied', function () {
    const r = readiness(applied(deployment(3, 2), 3));
    assert.equal(r.ready, false);
    assert.match(r.conditions[0]!.message, /observe agents/);
  });

  it('stays Ready when someone else raised the generation since (an HPA scaling replicas)', function () {
    assert.equal(readiness(applied(deployment(3, 2), 2)).ready, true);
  });

  it('uses the current generation when the applied one is unknown (after a restart)', function () {
    assert.equal(readiness(applied(deployment(3, 2))).ready, false);
    assert.equal(readiness(applied(deployment(3, 3))).ready, true);
  });

  it('is Ready only when the pods are available and run the current template', function () {
    const waiting = readiness(applied(deployment(1, 1, { available: 1 })));
    assert.equal(waiting.ready, false);
    assert.deepEqual([conditionOf(waiting, 'Ready').reason, conditionOf(waiting, 'Progressing').status], ['PodsUnavailable', 'True']);
    assert.match(conditionOf(waiting, 'Ready').message, /agents 1\/2 available/);
    // A rollout: two pods of the old template are still there.
    assert.equal(readiness(applied(deployment(2, 2, { replicas: 4, updated: 2, available: 4 }))).ready, false);
    assert.equal(readiness(applied(deployment(2, 2, { updated: 1 }))).ready, false);
    assert.equal(readiness(applied(deployment(1, 1, { wanted: 0, replicas: 0, updated: 0, available: 0 }))).ready, true, 'scaled to zero');
  });

  it('takes the minimum an autoscaled pool needs instead of all its pods', function () {
    const scaling = applied(deployment(4, 4, { wanted: 6, available: 2 }), 1);
    assert.equal(readiness(scaling, { minAvailable: new Map([['deployments/agents', 2]]) }).ready, true);
    // A new pool is Ready once the autoscaler has brought it to its minimum, not before.
    const fresh = applied(deployment(1, 1, { wanted: 1, available: 1 }));
    assert.equal(readiness(fresh, { minAvailable: new Map([['deployments/agents', 2]]) }).ready, false);
  });

  it('says whether the counts are still moving: converging until every pod wanted is there, current and available', function () {
    assert.equal(readiness(applied(deployment(1, 1))).converging, false, 'settled');
    assert.equal(readiness(applied(deployment(2, 1), 2)).converging, true, 'not observed yet');
    assert.equal(readiness(applied(deployment(1, 1, { available: 1 }))).converging, true, 'a pod starting');
    assert.equal(readiness(applied(deployment(1, 1, { replicas: 3, updated: 2 }))).converging, true, 'an old pod still there');
    // A pool Ready at its minimum while the autoscaler's further pods start.
    const scaling = readiness(applied(deployment(4, 4, { wanted: 6, available: 2 }), 1), { minAvailable: new Map([['deployments/agents', 2]]) });
    assert.deepEqual([scaling.ready, scaling.converging], [true, true]);
  });

  it('says why pods do not start: Degraded with the first reason, Ready not', function () {
    const r = readiness(applied(deployment(1, 1, { available: 0 })), {
      pods: [pod('agents-b', 'ghcr.io/tempora/generation:missing'), pod('agents-a', 'ghcr.io/tempora/generation:crashloop')],
    });
    const degraded = conditionOf(r, 'Degraded');
    assert.deepEqual([degraded.status, degraded.reason], ['True', 'CrashLoopBackOff']);
    assert.equal(
      degraded.message,
      'pod agents-a: CrashLoopBackOff: container gateway keeps exiting, last exit code 1 (Error); pod agents-b: ImagePullBackOff: cannot pull image ghcr.io/tempora/generation:missing',
    );
    assert.equal(conditionOf(r, 'Ready').reason, 'CrashLoopBackOff');
  });

  it("says in Ready, not only in Degraded, why a pod no node can take is missing: the scheduler's message", function () {
    const r = readiness(applied(deployment(1, 1, { available: 1 })), { pods: [pod('agents-a', 'x:1.0.0'), pod('agents-b', 'x:unschedulable')] });
    const ready = conditionOf(r, 'Ready');
    assert.deepEqual([r.ready, ready.status, ready.reason], [false, 'False', 'Unschedulable']);
    assert.equal(
      ready.message,
      "waiting for pods: agents 1/2 available; pod agents-b: Unschedulable: 0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector.",
    );
    assert.deepEqual([conditionOf(r, 'Degraded').status, conditionOf(r, 'Degraded').reason], ['True', 'Unschedulable']);
    assert.equal(conditionOf(r, 'Progressing').message, 'waiting for pods: agents 1/2 available', 'what is awaited, only');
    assert.equal(
      conditionOf(readiness(applied(deployment(1, 1, { available: 1 }))), 'Ready').message,
      'waiting for pods: agents 1/2 available',
      'nothing failing, nothing added',
    );
  });

  it('says what the spec names but is missing before what the pods report, without changing Ready', function () {
    const failing = { reason: 'SecretMissing', message: 'Secret keys (spec.secrets.keys) does not exist' };
    const waiting = readiness(applied(deployment(1, 1, { available: 0 })), { pods: [pod('agents-a', 'ghcr.io/tempora/generation:crashloop')], failing });
    assert.deepEqual(
      [conditionOf(waiting, 'Degraded').status, conditionOf(waiting, 'Degraded').reason, conditionOf(waiting, 'Degraded').message],
      ['True', 'SecretMissing', failing.message],
    );
    assert.equal(conditionOf(waiting, 'Ready').reason, 'SecretMissing');
    const running = readiness(applied(deployment(1, 1)), { failing });
    assert.deepEqual([running.ready, conditionOf(running, 'Ready').status, conditionOf(running, 'Degraded').reason], [true, 'True', 'SecretMissing']);
  });

  it('tells pods on their way from pods that cannot start', function () {
    const creating: Pod = {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'p' },
      status: {
        phase: 'Pending',
        containerStatuses: [{ name: 'c', image: 'x:1.0.0', imageID: '', ready: false, restartCount: 0, state: { waiting: { reason: 'ContainerCreating' } } }],
      },
    };
    assert.deepEqual(podProblems([creating, pod('q', 'x:pending'), pod('r', 'x:1.0.0')]), []);
    assert.deepEqual(
      podProblems([pod('s', 'x:unschedulable')]).map((p) => p.reason),
      ['Unschedulable'],
    );
    const evicted: Pod = {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'e' },
      status: { phase: 'Failed', reason: 'Evicted', message: 'low on memory' },
    };
    assert.deepEqual(podProblems([evicted]), [{ pod: 'e', reason: 'Evicted', message: 'low on memory' }]);
  });

  it("refuses with the reconciler's reason when the spec cannot be carried out", function () {
    const r = readiness(applied(deployment(1, 1)), { blocked: { reason: 'GatewayNotFound', message: 'TemporaGateway x does not exist' } });
    assert.equal(r.ready, false);
    assert.deepEqual(
      r.conditions.map((c) => [c.type, c.status, c.reason]),
      [
        ['Ready', 'False', 'GatewayNotFound'],
        ['Progressing', 'False', 'GatewayNotFound'],
        ['Degraded', 'True', 'GatewayNotFound'],
      ],
    );
  });
});
