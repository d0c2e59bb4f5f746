// What Ready means. The operator cannot know whether a container works, only whether Kubernetes has
// taken its desired state in: Ready=True when every child is applied and each workload controller has
// observed the child's current generation (a Deployment's status.observedGeneration caught up, which
// is also when its ReplicaSet exists). Pod availability is reported next to it (status fields and the
// condition message) but does not gate Ready, so Ready does not depend on a kubelet, image pulls or a
// dependency outside the cluster; alert on availability from the workloads' own metrics.
import type { ConditionInput } from '../kube/conditions.ts';
import type { KubeObject } from '../kube/object.ts';
import type { AppliedChildren } from './apply-children.ts';

export interface Readiness {
  conditions: ConditionInput[];
  ready: boolean;
}

interface DeploymentState {
  observed: boolean;
  failed: string | undefined;
  replicas: number;
  available: number;
}

export function deploymentState(d: KubeObject): DeploymentState {
  const status = (d.status ?? {}) as {
    observedGeneration?: number;
    replicas?: number;
    availableReplicas?: number;
    conditions?: { type: string; status: string; reason?: string; message?: string }[];
  };
  const failure = status.conditions?.find(
    (c) => (c.type === 'ReplicaFailure' && c.status === 'True') || (c.type === 'Progressing' && c.status === 'False'),
  );
  return {
    observed: (status.observedGeneration ?? 0) >= (d.metadata.generation ?? 1),
    failed: failure ? `${d.metadata.name}: ${failure.reason ?? failure.type} ${failure.message ?? ''}`.trim() : undefined,
    replicas: status.replicas ?? 0,
    available: status.availableReplicas ?? 0,
  };
}

export function readiness(applied: AppliedChildren): Readiness {
  if (applied.errors.length > 0) {
    const message = applied.errors.join('; ').slice(0, 1000);
    return {
      ready: false,
      conditions: [
        { type: 'Ready', status: 'False', reason: 'ApplyFailed', message },
        { type: 'Progressing', status: 'False', reason: 'ApplyFailed', message },
        { type: 'Degraded', status: 'True', reason: 'ApplyFailed', message },
      ],
    };
  }
  const deployments = [...applied.live.values()].filter((o) => o.kind === 'Deployment').map(deploymentState);
  const pending = [...applied.live.entries()]
    .filter(([, o]) => o.kind === 'Deployment' && !deploymentState(o).observed)
    .map(([k]) => k.split('/')[1]);
  const failures = deployments.map((d) => d.failed).filter((f): f is string => f !== undefined);
  const replicas = deployments.reduce((n, d) => n + d.replicas, 0);
  const available = deployments.reduce((n, d) => n + d.available, 0);
  const summary = `${applied.live.size} children applied; ${available}/${replicas} pods available`;
  const degraded: ConditionInput =
    failures.length > 0
      ? { type: 'Degraded', status: 'True', reason: 'RolloutFailed', message: failures.join('; ').slice(0, 1000) }
      : { type: 'Degraded', status: 'False', reason: 'Healthy', message: 'no child reports a failure' };
  if (pending.length > 0) {
    const message = `waiting for the controllers to observe ${pending.join(', ')}`;
    return {
      ready: false,
      conditions: [
        { type: 'Ready', status: 'False', reason: 'Progressing', message },
        { type: 'Progressing', status: 'True', reason: 'RolloutPending', message },
        degraded,
      ],
    };
  }
  return {
    ready: true,
    conditions: [
      { type: 'Ready', status: 'True', reason: 'Reconciled', message: summary },
      { type: 'Progressing', status: 'False', reason: 'Reconciled', message: 'every child is at its desired generation' },
      degraded,
    ],
  };
}
