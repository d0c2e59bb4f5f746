import assert from 'node:assert/strict';
import type { KubeObject } from '../src/kube/object.ts';
import type { AppliedChildren } from '../src/reconcilers/apply-children.ts';
import { readiness } from '../src/reconcilers/readiness.ts';

const deployment = (generation: number, observedGeneration: number): KubeObject => ({
  apiVersion: 'apps/v1',
  kind: 'Deployment',
  metadata: { name: 'agents', generation },
  status: { observedGeneration, replicas: 2 },
});

const applied = (d: KubeObject, observeAt?: number): AppliedChildren => ({
  live: new Map([['deployments/agents', d]]),
  errors: [],
  wroteWatched: false,
  observeAt: new Map(observeAt === undefined ? [] : [['deployments/agents', observeAt]]),
});

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
});
