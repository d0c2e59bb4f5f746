// What Ready means. The operator cannot know whether a container works, only whether Kubernetes has
// taken its desired state in: Ready=True when every child is applied and each workload controller has
// observed the generation the operator's last apply gave the child (a Deployment's
// status.observedGeneration caught up, which is also when its ReplicaSet exists). A generation raised
// after that by someone else (an HPA or `kubectl scale` changing replicas the operator leaves to them)
// does not make the owner un-Ready: otherwise an autoscaled AgentPool would flap at every scale, with an
// Event each way. After an operator restart, until its next apply, the current generation counts. Pod availability is reported next to it (status fields and the
// condition message) but does not gate Ready, so Ready does not depend on a kubelet, image pulls or a
// dependency outside the cluster; alert on availability from the workloads' own metrics.
import type { ConditionInput } from '../kube/conditions.ts';
import type { KubeObject } from '../kube/object.ts';
import type { AppliedChildren } from './apply-children.ts';

export interface Readiness {
  conditions: ConditionInput[];
  ready: boolean;
  /**
   * Not Ready only because Deployments this reconcile just wrote are not observed yet. Their watch events
   * reconcile the owner again, so writing "Progressing" now would mostly be overwritten by "Ready" a
   * moment later: status waits for that reconcile (see updateStatus).
   */
  settling: boolean;
}

interface DeploymentState {
  observed: boolean;
  failed: string | undefined;
  replicas: number;
  available: number;
}

/** `observeAt`: the generation the deployment controller must have observed; by default the current one. */
export function deploymentState(d: KubeObject, observeAt = d.metadata.generation ?? 1): DeploymentState {
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
    observed: (status.observedGeneration ?? 0) >= observeAt,
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
      settling: false,
      conditions: [
        { type: 'Ready', status: 'False', reason: 'ApplyFailed', message },
        { type: 'Progressing', status: 'False', reason: 'ApplyFailed', message },
        { type: 'Degraded', status: 'True', reason: 'ApplyFailed', message },
      ],
    };
  }
  const states = [...applied.live.entries()]
    .filter(([, o]) => o.kind === 'Deployment')
    .map(([key, o]) => ({ key, state: deploymentState(o, applied.observeAt.get(key)) }));
  const deployments = states.map((s) => s.state);
  const pending = states.filter((s) => !s.state.observed).map((s) => s.key.split('/')[1]);
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
      settling: applied.wroteWatched,
      conditions: [
        { type: 'Ready', status: 'False', reason: 'Progressing', message },
        { type: 'Progressing', status: 'True', reason: 'RolloutPending', message },
        degraded,
      ],
    };
  }
  return {
    ready: true,
    settling: false,
    conditions: [
      { type: 'Ready', status: 'True', reason: 'Reconciled', message: summary },
      { type: 'Progressing', status: 'False', reason: 'Reconciled', message: 'every child is at its desired generation' },
      degraded,
    ],
  };
}
