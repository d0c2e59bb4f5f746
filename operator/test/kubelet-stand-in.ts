// The test control plane runs no kubelet and no scheduler, so nothing reports on pods. This does what they
// would, through the same API (the pods' status subresource): every pod the controllers create is
// scheduled, started and Ready, unless its image tag asks for a failure a real node would report:
//   :crashloop*      the container keeps exiting (CrashLoopBackOff, last exit code 1)
//   :missing*        the image cannot be pulled (ImagePullBackOff)
//   :unschedulable*  no node can take the pod (PodScheduled False, Unschedulable)
//   :pending*        the pod is left as the controllers made it (waiting for a node)
// and, as the scheduler would, reports a pod whose nodeSelector the one node's labels (NODE_LABELS) do not
// satisfy as unschedulable, with the scheduler's message.
// The end-to-end tests on a real node (test/k8s) see the same states from a real kubelet.
//
// ConfigMapVolume does what a kubelet does for a ConfigMap mounted as a volume: it keeps a directory of
// the ConfigMap's keys up to date, so that a process in the test reads it as a pod would.
import { existsSync, mkdirSync, readdirSync, renameSync, rmSync, symlinkSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { KubeClient } from '../src/kube/client.ts';
import type { Pod as PodObject } from '../src/kube/object.ts';
import { ConfigMap, objectPath, Pod } from '../src/kube/resources.ts';

/** The labels of the node the stand-in plays, as a kubelet registers them. */
export const NODE_LABELS: Record<string, string> = { 'kubernetes.io/os': 'linux', 'kubernetes.io/arch': 'amd64', 'kubernetes.io/hostname': 'kubelet-stand-in' };

const now = () => new Date().toISOString().replace(/\.\d{3}Z$/, 'Z');

/** The status a node would report for this pod, or undefined when it would report nothing. */
export function nodeReport(pod: PodObject): PodObject['status'] {
  const { containers = [], nodeSelector = {} } = pod.spec ?? {};
  const tag = (containers[0]?.image?.split(':').pop() ?? '').toLowerCase();
  const at = now();
  const condition = (type: string, status: string, extra: Record<string, unknown> = {}) => ({ type, status, lastTransitionTime: at, ...extra });
  type ContainerStatus = NonNullable<NonNullable<PodObject['status']>['containerStatuses']>[number];
  const statuses = (state: (c: { name: string; image: string }) => Partial<ContainerStatus>, ready: boolean): ContainerStatus[] =>
    containers.map((c) => ({
      name: c.name,
      image: c.image ?? '',
      imageID: '',
      ready,
      restartCount: 0,
      started: ready,
      ...state({ name: c.name, image: c.image ?? '' }),
    }));
  if (tag.startsWith('pending')) return undefined;
  if (tag.startsWith('unschedulable') || Object.entries(nodeSelector).some(([k, v]) => NODE_LABELS[k] !== v)) {
    return {
      phase: 'Pending',
      conditions: [
        condition('PodScheduled', 'False', {
          reason: 'Unschedulable',
          message: "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector.",
        }),
      ],
    };
  }
  const scheduled = [condition('PodScheduled', 'True'), condition('Initialized', 'True')];
  if (tag.startsWith('missing')) {
    return {
      phase: 'Pending',
      startTime: at,
      conditions: [...scheduled, condition('ContainersReady', 'False'), condition('Ready', 'False')],
      containerStatuses: statuses((c) => ({ state: { waiting: { reason: 'ImagePullBackOff', message: `Back-off pulling image "${c.image}"` } } }), false),
    };
  }
  if (tag.startsWith('crashloop')) {
    return {
      phase: 'Running',
      startTime: at,
      conditions: [...scheduled, condition('ContainersReady', 'False'), condition('Ready', 'False')],
      containerStatuses: statuses(
        (c) => ({
          state: { waiting: { reason: 'CrashLoopBackOff', message: `back-off 10s restarting failed container=${c.name}` } },
          lastState: { terminated: { exitCode: 1, reason: 'Error', startedAt: at, finishedAt: at } },
        }),
        false,
      ),
    };
  }
  return {
    phase: 'Running',
    startTime: at,
    podIP: '10.244.0.10',
    conditions: [...scheduled, condition('ContainersReady', 'True'), condition('Ready', 'True')],
    containerStatuses: statuses(() => ({ state: { running: { startedAt: at } } }), true),
  };
}

/** Reports on every pod once, as a node would after starting it; polls, which is plenty for tests. */
export class KubeletStandIn {
  readonly #client: KubeClient;
  readonly #reported = new Set<string>();
  #timer: NodeJS.Timeout | undefined;
  #pass: Promise<void> = Promise.resolve();

  constructor(client: KubeClient) {
    this.#client = client;
  }

  start(intervalMs = 200): void {
    this.#timer = setInterval(() => {
      this.#pass = this.#pass.then(() => this.#report()).catch(() => {});
    }, intervalMs);
  }

  async stop(): Promise<void> {
    clearInterval(this.#timer);
    await this.#pass;
  }

  async #report(): Promise<void> {
    const pods = await this.#client.list(Pod, {});
    await Promise.all(
      pods.items.map(async (pod) => {
        const uid = pod.metadata.uid ?? '';
        if (this.#reported.has(uid) || pod.metadata.deletionTimestamp) return;
        const status = nodeReport(pod);
        if (status) {
          await this.#client.request('PATCH', `${objectPath(Pod, pod.metadata.namespace ?? '', pod.metadata.name)}/status`, {
            body: { status },
            contentType: 'application/merge-patch+json',
            query: { fieldManager: 'kubelet' },
          });
        }
        this.#reported.add(uid);
      }),
    );
  }
}

/**
 * A ConfigMap mounted as a directory, laid out as the kubelet's atomic writer does: the files are in a
 * timestamped directory that the link `..data` points at, each key is a link `<key>` → `..data/<key>`,
 * and an update writes a new directory and swaps `..data` in one rename, so a reader never sees half of
 * it. Polls the ConfigMap; while it does not exist the directory stays as it is.
 */
export class ConfigMapVolume {
  readonly #client: KubeClient;
  readonly #namespace: string;
  readonly #name: string;
  readonly directory: string;
  #written = '';
  #timer: NodeJS.Timeout | undefined;
  #pass: Promise<void> = Promise.resolve();
  #updates = 0;

  constructor(client: KubeClient, namespace: string, name: string, directory: string) {
    this.#client = client;
    this.#namespace = namespace;
    this.#name = name;
    this.directory = directory;
  }

  /** How many times the directory was rewritten. */
  get updates(): number {
    return this.#updates;
  }

  start(intervalMs = 200): void {
    this.#timer = setInterval(() => {
      this.#pass = this.#pass.then(() => this.sync()).catch(() => {});
    }, intervalMs);
  }

  async stop(): Promise<void> {
    clearInterval(this.#timer);
    await this.#pass;
  }

  async sync(): Promise<void> {
    const found = await this.#client.getOrUndefined(ConfigMap, this.#namespace, this.#name);
    if (!found) return;
    const data = found.data ?? {};
    const text = JSON.stringify(data);
    if (text === this.#written) return;
    const dir = this.directory;
    const previous = readdirSync(dir).filter((entry) => entry.startsWith('..') && entry !== '..data');
    const stamp = `..${new Date().toISOString().replace(/[:.]/g, '_')}.${this.#updates}`;
    mkdirSync(join(dir, stamp));
    for (const [key, value] of Object.entries(data)) writeFileSync(join(dir, stamp, key), value);
    symlinkSync(stamp, join(dir, '..data_tmp'));
    renameSync(join(dir, '..data_tmp'), join(dir, '..data'));
    for (const key of Object.keys(data)) if (!existsSync(join(dir, key))) symlinkSync(join('..data', key), join(dir, key));
    for (const entry of readdirSync(dir)) if (!entry.startsWith('..') && !Object.hasOwn(data, entry)) unlinkSync(join(dir, entry));
    for (const old of previous) rmSync(join(dir, old), { recursive: true, force: true });
    this.#written = text;
    this.#updates += 1;
  }
}
