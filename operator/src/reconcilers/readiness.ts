// What Ready means: the workloads are available. Ready=True when every child is applied and every
// Deployment has rolled out what the operator last applied: its controller observed that generation, all
// its pods run the current template, and enough of them are available — all it wants, or for a pool an
// autoscaler sizes, its minimum (so that scaling up does not make the pool un-Ready while new pods start,
// and a new pool is Ready once the autoscaler has brought it to its minimum).
// A generation raised after the operator's apply by someone else (an HPA or `kubectl scale` changing
// replicas the operator leaves to them) is not waited for; after an operator restart, until its next
// apply, the current generation counts.
//
// Why not: Progressing says what is awaited, Degraded what is failing — a Deployment's own failure
// conditions, and pods that cannot start (crash loops, images that cannot be pulled, pods no node can
// take: PodScheduled=False, Unschedulable, with the scheduler's message), read from the pods' status as
// the kubelet and the scheduler report it. Ready takes Degraded's reason, and its message, while pods are
// missing.
import type { ConditionInput } from '../kube/conditions.ts';
import type { Deployment, Pod } from '../kube/object.ts';
import * as R from '../kube/resources.ts';
import type { AppliedChildren } from './apply-children.ts';

export interface Readiness {
  conditions: ConditionInput[];
  ready: boolean;
  /**
   * Not Ready only because Deployments this reconcile just wrote are not observed yet. Their watch events
   * reconcile the owner again, so writing "Progressing" now would mostly be overwritten a moment later:
   * status waits for that reconcile (see updateStatus).
   */
  settling: boolean;
  /**
   * Some Deployment is still on its way to the count it wants: not observed yet, or pods being created,
   * started or removed. Its counts then change from one moment to the next, and status need not follow
   * each step (see updateStatus).
   */
  converging: boolean;
}

/** Why the owner's spec cannot be carried out as it stands (a refusal); it also makes the owner Degraded. */
export interface Blocked {
  reason: string;
  message: string;
}

export interface ReadinessInput {
  /** The owner's pods (OWNER_UID_LABEL), for why they do not start. */
  pods?: Pod[];
  /** Available pods enough for a Deployment, by `deployments/<name>`, where fewer than all it wants will do. */
  minAvailable?: Map<string, number>;
  blocked?: Blocked;
  /**
   * What the owner's spec names but is not there (a Secret): the owner is applied all the same, and Degraded
   * says so before what its pods report, which it usually explains (a pod waiting for a missing Secret).
   */
  failing?: Blocked;
}

export interface DeploymentState {
  name: string;
  observed: boolean;
  /** Rolled out: every pod runs the current template and enough are available. */
  available: boolean;
  /** Observed, with exactly the pods it wants, all current and available: its counts stay as they are. */
  settled: boolean;
  failed: string | undefined;
  wanted: number;
  replicas: number;
  availableReplicas: number;
}

/** `observeAt`: the generation the deployment controller must have observed; by default the current one. */
export function deploymentState(d: Deployment, observeAt = d.metadata.generation ?? 1, minAvailable?: number): DeploymentState {
  const status = d.status ?? {};
  const wanted = d.spec?.replicas ?? 1;
  const failure = status.conditions?.find((c) => (c.type === 'ReplicaFailure' && c.status === 'True') || (c.type === 'Progressing' && c.status === 'False'));
  const observed = (status.observedGeneration ?? 0) >= observeAt;
  const replicas = status.replicas ?? 0;
  const updated = status.updatedReplicas ?? 0;
  const availableReplicas = status.availableReplicas ?? 0;
  return {
    name: d.metadata.name,
    observed,
    available: observed && updated >= wanted && replicas <= updated && availableReplicas >= (minAvailable ?? wanted),
    settled: observed && replicas === wanted && updated === wanted && availableReplicas === wanted,
    failed: failure ? `${d.metadata.name}: ${failure.reason ?? failure.type} ${failure.message ?? ''}`.trim() : undefined,
    wanted,
    replicas,
    availableReplicas,
  };
}

export interface PodProblem {
  pod: string;
  reason: string;
  message: string;
}

type ContainerStatus = NonNullable<NonNullable<Pod['status']>['containerStatuses']>[number];

/** Waiting reasons of a container on its normal way to running. */
const STARTING = new Set(['ContainerCreating', 'PodInitializing']);

/**
 * Why a container waits, in words that stay the same while the problem does (the kubelet's own messages
 * change with every back-off step and between ErrImagePull and ImagePullBackOff, which would rewrite
 * status and record Events for no news).
 */
function waitingProblem(c: ContainerStatus, reason: string, message: string | undefined): Omit<PodProblem, 'pod'> {
  if (reason === 'ErrImagePull' || reason === 'ImagePullBackOff') return { reason: 'ImagePullBackOff', message: `cannot pull image ${c.image ?? ''}`.trim() };
  if (reason === 'CrashLoopBackOff') {
    const last = c.lastState?.terminated;
    const exit = last ? `, last exit code ${last.exitCode ?? '?'}${last.reason ? ` (${last.reason})` : ''}` : '';
    return { reason, message: `container ${c.name} keeps exiting${exit}` };
  }
  return { reason, message: message ?? `container ${c.name} waiting` };
}

/** The pods that cannot start or have failed, and why; pods on their way (pending, creating) are not problems. */
export function podProblems(pods: Pod[]): PodProblem[] {
  const problems: PodProblem[] = [];
  for (const pod of pods) {
    if (pod.metadata.deletionTimestamp) continue;
    const status = pod.status ?? {};
    const at = (p: Omit<PodProblem, 'pod'>) => problems.push({ pod: pod.metadata.name, ...p });
    if (status.phase === 'Failed') {
      at({ reason: status.reason ?? 'Failed', message: status.message ?? 'the pod failed' });
      continue;
    }
    const unschedulable = status.conditions?.find((c) => c.type === 'PodScheduled' && c.status === 'False' && c.reason === 'Unschedulable');
    if (unschedulable) {
      at({ reason: 'Unschedulable', message: unschedulable.message ?? 'no node can run it' });
      continue;
    }
    const waiting = [...(status.initContainerStatuses ?? []), ...(status.containerStatuses ?? [])].find(
      (c) => c.state?.waiting?.reason && !STARTING.has(c.state.waiting.reason),
    );
    if (waiting) at(waitingProblem(waiting, waiting.state!.waiting!.reason!, waiting.state!.waiting!.message));
  }
  return problems.sort((a, b) => a.pod.localeCompare(b.pod));
}

function describe(problems: PodProblem[]): string {
  const shown = problems.slice(0, 3).map((p) => `pod ${p.pod}: ${p.reason}: ${p.message}`);
  if (problems.length > shown.length) shown.push(`${problems.length - shown.length} more`);
  return shown.join('; ');
}

const clip = (message: string) => message.slice(0, 1000);

export function readiness(applied: AppliedChildren, input: ReadinessInput = {}): Readiness {
  const refusal = applied.errors.length > 0 ? { reason: 'ApplyFailed', message: applied.errors.join('; ') } : input.blocked;
  if (refusal) {
    const message = clip(refusal.message);
    return {
      ready: false,
      settling: false,
      converging: false,
      conditions: [
        { type: 'Ready', status: 'False', reason: refusal.reason, message },
        { type: 'Progressing', status: 'False', reason: refusal.reason, message },
        { type: 'Degraded', status: 'True', reason: refusal.reason, message },
      ],
    };
  }
  const states = [...applied.live.entries()].flatMap(([key, o]) =>
    R.isOf(R.Deployment, o) ? [deploymentState(o, applied.observeAt.get(key), input.minAvailable?.get(key))] : [],
  );
  const failures = states.map((d) => d.failed).filter((f): f is string => f !== undefined);
  const problems = podProblems(input.pods ?? []);
  const degraded: ConditionInput = input.failing
    ? { type: 'Degraded', status: 'True', reason: input.failing.reason, message: clip(input.failing.message) }
    : failures.length > 0
      ? { type: 'Degraded', status: 'True', reason: 'RolloutFailed', message: clip([...failures, describe(problems)].filter(Boolean).join('; ')) }
      : problems.length > 0
        ? { type: 'Degraded', status: 'True', reason: problems[0]!.reason, message: clip(describe(problems)) }
        : { type: 'Degraded', status: 'False', reason: 'Healthy', message: 'no child reports a failure' };
  const converging = states.some((s) => !s.settled);
  const pending = states.filter((s) => !s.observed).map((s) => s.name);
  if (pending.length > 0) {
    const message = `waiting for the controllers to observe ${pending.join(', ')}`;
    return {
      ready: false,
      settling: applied.wroteWatched,
      converging,
      conditions: [
        // A pod that cannot start is the news, even while another Deployment's change is not observed yet.
        { type: 'Ready', status: 'False', reason: degraded.status === 'True' ? degraded.reason : 'Progressing', message },
        { type: 'Progressing', status: 'True', reason: 'RolloutPending', message },
        degraded,
      ],
    };
  }
  const counts = (d: DeploymentState) => `${d.name} ${d.availableReplicas}/${d.wanted} available`;
  const waiting = states.filter((s) => !s.available);
  if (waiting.length > 0) {
    const message = clip(`waiting for pods: ${waiting.map(counts).join(', ')}`);
    // Ready says why the pods are not there when Degraded knows (a pod no node can take: the scheduler's words).
    const why = degraded.status === 'True' ? clip(`${message}; ${degraded.message}`) : message;
    return {
      ready: false,
      settling: false,
      converging,
      conditions: [
        { type: 'Ready', status: 'False', reason: degraded.status === 'True' ? degraded.reason : 'PodsUnavailable', message: why },
        { type: 'Progressing', status: 'True', reason: 'RollingOut', message },
        degraded,
      ],
    };
  }
  const summary = `${applied.live.size} children applied; ${states.reduce((n, d) => n + d.availableReplicas, 0)}/${states.reduce((n, d) => n + d.wanted, 0)} pods available`;
  return {
    ready: true,
    settling: false,
    converging,
    conditions: [
      { type: 'Ready', status: 'True', reason: 'Reconciled', message: summary },
      { type: 'Progressing', status: 'False', reason: 'Reconciled', message: 'every workload is rolled out and available' },
      degraded,
    ],
  };
}
