import assert from 'node:assert/strict';
import { isSubset, needsApply, withSpecHash } from '../src/kube/drift.ts';
import type { KubeObject } from '../src/kube/object.ts';

describe('drift detection', function () {
  it('ignores fields the API server or others added', function () {
    assert.ok(isSubset({ spec: { replicas: 2 } }, { spec: { replicas: 2, strategy: { type: 'RollingUpdate' } } }));
    assert.ok(!isSubset({ spec: { replicas: 2 } }, { spec: { replicas: 3 } }));
  });

  it('compares lists element by element', function () {
    assert.ok(isSubset([{ name: 'a' }], [{ name: 'a', terminationMessagePath: '/dev/termination-log' }]));
    assert.ok(!isSubset([{ name: 'a' }], [{ name: 'a' }, { name: 'b' }]));
  });

  it('treats canonicalised quantities as equal', function () {
    assert.ok(isSubset({ cpu: '0.5', memory: '1024Mi' }, { cpu: '500m', memory: '1Gi' }));
    assert.ok(!isSubset({ cpu: '0.5' }, { cpu: '600m' }));
  });

  it('re-applies when the desired manifest changed even if the live object still matches', function () {
    const desired = withSpecHash({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'x' } });
    const live: KubeObject = { ...desired, metadata: { ...desired.metadata, annotations: { 'tempora.dev/spec-hash': 'old' } } };
    assert.ok(needsApply(desired, live));
    assert.ok(!needsApply(desired, structuredClone(desired)));
    assert.ok(needsApply(desired, undefined));
  });
});
