import assert from 'node:assert/strict';
import { needsApply } from '../src/kube/drift.ts';
import type { KubeObject } from '../src/kube/object.ts';
import { projectChild } from '../src/kube/projection.ts';
import { fieldsAt } from './fixtures.ts';

// A Deployment as the API server returns it: the operator applied the container's image and one env
// variable; another manager added an env variable and an annotation, kube-controller-manager wrote
// status, and the API server filled in defaults.
const live: KubeObject = {
  apiVersion: 'apps/v1',
  kind: 'Deployment',
  metadata: {
    name: 'alpha-graph',
    namespace: 'default',
    resourceVersion: '42',
    labels: { app: 'graph' },
    managedFields: [
      {
        manager: 'tempora-operator',
        operation: 'Apply',
        apiVersion: 'apps/v1',
        fieldsType: 'FieldsV1',
        fieldsV1: {
          'f:metadata': { 'f:labels': { 'f:app': {} } },
          'f:spec': {
            'f:template': {
              'f:spec': {
                'f:containers': {
                  'k:{"name":"graph"}': {
                    '.': {},
                    'f:name': {},
                    'f:image': {},
                    'f:command': {},
                    'f:env': { 'k:{"name":"PORT"}': { '.': {}, 'f:name': {}, 'f:value': {} } },
                  },
                },
              },
            },
          },
        },
      },
      {
        manager: 'kubectl',
        operation: 'Apply',
        apiVersion: 'apps/v1',
        fieldsType: 'FieldsV1',
        fieldsV1: { 'f:spec': { 'f:template': { 'f:spec': { 'f:containers': { 'k:{"name":"graph"}': { 'f:env': { 'k:{"name":"DEBUG"}': {} } } } } } } },
      },
      {
        manager: 'kube-controller-manager',
        operation: 'Update',
        subresource: 'status',
        apiVersion: 'apps/v1',
        fieldsType: 'FieldsV1',
        fieldsV1: { 'f:status': { 'f:replicas': {} } },
      },
    ],
  },
  spec: {
    replicas: 1,
    revisionHistoryLimit: 10,
    template: {
      spec: {
        dnsPolicy: 'ClusterFirst',
        containers: [
          {
            name: 'graph',
            image: 'ghcr.io/tempora/graph:1.0.0',
            command: ['node', 'src/main.ts'],
            env: [
              { name: 'PORT', value: '8082' },
              { name: 'DEBUG', value: '1' },
            ],
            terminationMessagePath: '/dev/termination-log',
          },
        ],
      },
    },
  },
  status: { observedGeneration: 3, replicas: 1, readyReplicas: 0, conditions: [{ type: 'Progressing', status: 'True' }] },
};

const READ = [
  ['status', 'observedGeneration'],
  ['status', 'replicas'],
];

describe('informer cache projection', function () {
  it('keeps metadata, the fields the operator applied and the status it reads; nothing else', function () {
    const { managedFields, ...metadata } = live.metadata;
    assert.ok(managedFields);
    assert.deepEqual(projectChild(live, 'tempora-operator', READ), {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata,
      spec: {
        template: {
          spec: {
            containers: [{ name: 'graph', image: 'ghcr.io/tempora/graph:1.0.0', command: ['node', 'src/main.ts'], env: [{ name: 'PORT', value: '8082' }] }],
          },
        },
      },
      status: { observedGeneration: 3, replicas: 1 },
    });
  });

  it('is what drift detection needs: converged as applied, drifted once someone takes an owned field', function () {
    const desired: KubeObject = {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: 'alpha-graph', namespace: 'default', labels: { app: 'graph' } },
      spec: {
        template: {
          spec: {
            containers: [{ name: 'graph', image: 'ghcr.io/tempora/graph:1.0.0', command: ['node', 'src/main.ts'], env: [{ name: 'PORT', value: '8082' }] }],
          },
        },
      },
    };
    assert.equal(needsApply(desired, projectChild(live, 'tempora-operator')), false, "another manager's env variable is not drift");
    const takenOver = structuredClone(live);
    const ours = fieldsAt(takenOver.metadata.managedFields?.[0]?.fieldsV1, 'f:spec', 'f:template', 'f:spec', 'f:containers', 'k:{"name":"graph"}');
    assert.ok(ours);
    delete ours['f:image'];
    assert.equal(needsApply(desired, projectChild(takenOver, 'tempora-operator')), true);
  });
});
