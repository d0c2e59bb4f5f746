// The chart renders crds/ through links under files/crds (its templates install and upgrade them) and
// restates the RBAC rules; these checks keep them from drifting apart.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { V1CustomResourceDefinition } from '@kubernetes/client-node';
import { parse } from 'yaml';
import type { Kind } from '../src/kube/object.ts';
import { isOf, type ResourceType } from '../src/kube/resources.ts';
import { CRD_DIR, manifests } from './cluster.ts';

const CRD: ResourceType<Kind<V1CustomResourceDefinition>> = {
  group: 'apiextensions.k8s.io',
  version: 'v1',
  kind: 'CustomResourceDefinition',
  plural: 'customresourcedefinitions',
};

const CHART = join(CRD_DIR, '..', 'charts', 'tempora-operator');

describe('manifests', function () {
  it('the chart carries exactly the CRDs in crds/', function () {
    const crds = readdirSync(CRD_DIR)
      .filter((f) => f.endsWith('.yaml'))
      .sort();
    assert.deepEqual(readdirSync(join(CHART, 'files', 'crds')).sort(), crds);
    for (const f of crds) assert.equal(readFileSync(join(CHART, 'files', 'crds', f), 'utf8'), readFileSync(join(CRD_DIR, f), 'utf8'), f);
  });

  it('the chart grants the same rules as crds/rbac', function () {
    const rbac = manifests(join(CRD_DIR, 'rbac', 'operator.yaml'));
    const clusterRole = rbac.find((m) => m.kind === 'ClusterRole');
    const leaderRole = rbac.find((m) => m.kind === 'Role');
    const template = readFileSync(join(CHART, 'templates', 'rbac.yaml'), 'utf8');
    const ruleBlocks = [...template.matchAll(/^rules:\n((?: {2}.*\n)+)/gm)].map((m) => parse(m[1]!) as unknown[]);
    assert.deepEqual(ruleBlocks, [clusterRole?.rules, leaderRole?.rules]);
  });

  it('every CRD has a status subresource, short names and printer columns', function () {
    for (const f of readdirSync(CRD_DIR).filter((x) => x.endsWith('.yaml'))) {
      const [crd] = manifests(join(CRD_DIR, f));
      assert.ok(crd && isOf(CRD, crd), f);
      assert.ok((crd.spec.names.shortNames ?? []).length > 0, f);
      for (const v of crd.spec.versions) {
        assert.deepEqual(v.subresources, { status: {} }, f);
        assert.ok((v.additionalPrinterColumns ?? []).length >= 3, f);
      }
    }
  });
});
