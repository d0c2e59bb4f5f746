// A real one-node Kubernetes cluster for tests (test/k8s/README.md): the control plane of
// control-plane.ts listening on the node's address, containerd + runc from Debian with the CNI bridge
// plugin, a kubelet, kube-scheduler and kube-proxy (iptables mode) built like kube-apiserver, CoreDNS for
// Service names, and BuildKit building our own Dockerfiles into containerd on a local Debian + Node base.
// Everything it changes on the host is recorded first and put back by stop(), by the process's exit, or
// by SIGINT/SIGTERM; a run that was killed outright is cleaned up by the next one (the lock file keeps
// what it recorded).
import { type ChildProcess, execFileSync, spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  appendFileSync,
  closeSync,
  createWriteStream,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  rmSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs';
import { request } from 'node:https';
import { connect } from 'node:net';
import { tmpdir, userInfo } from 'node:os';
import { basename, dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildctlBaseArgs, LAYOUT_NAME } from '../../scripts/base-image.ts';
import { aptInstall, freePort } from '../../scripts/infra.ts';
import { cacheRoot } from '../support/cache.ts';
import { waitFor } from '../support/wait.ts';
import { binaryDir, ControlPlane, firstAddress, K8S_VERSION } from './control-plane.ts';
import { buildGoTool, type GoTool, goToolPath } from './go-tool.ts';
import { alive, type HostSnapshot, killAndWait, type RestoreScope, restoreHost, snapshotHost } from './host-state.ts';

const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = join(HERE, '..', '..');
export const BUILDKIT_VERSION = 'v0.34.2';
export const COREDNS_VERSION = 'v1.12.0';
export const NODE_NAME = 'tempora-node';
/** The CNI bridge's gateway: the node's address, where pods reach the host (and the API server, DNS). */
export const NODE_ADDRESS = '10.88.0.1';
export const POD_CIDR = '10.88.0.0/24';
export const SERVICE_CIDR = '10.96.0.0/16';
const BRIDGE = 'tempora0';
/**
 * kind's local-registry recipe's name for a plain-HTTP registry on the host (docs/kind.md): containerd and
 * BuildKit here reach it over HTTP, as kind's node does through its hosts.toml. test/k8s/registry.ts runs one.
 */
export const LOCAL_REGISTRY = 'localhost:5001';
const PAUSE_IMAGE = 'docker.io/local/pause:1';
const LOCK_FILE = '/run/tempora-node.json';
const DEBIAN_PACKAGES: Record<string, string> = {
  containerd: 'containerd',
  runc: 'runc',
  '/usr/lib/cni/bridge': 'containernetworking-plugins',
  debootstrap: 'debootstrap',
  umoci: 'umoci',
  iptables: 'iptables',
  // kube-router's policy controller (network-policy.ts) keeps its pod and policy sets in ipsets.
  ipset: 'ipset',
  conntrack: 'conntrack',
  nft: 'nftables',
  etcd: 'etcd-server',
  openssl: 'openssl',
};

const BUILDKIT: GoTool = {
  name: 'buildkit',
  version: BUILDKIT_VERSION,
  module: 'github.com/moby/buildkit',
  packages: ['github.com/moby/buildkit/cmd/buildkitd', 'github.com/moby/buildkit/cmd/buildctl'],
  buildHint: '7-8 min',
  extraLdflags: `-X github.com/moby/buildkit/version.Version=${BUILDKIT_VERSION}`,
};
const COREDNS: GoTool = {
  name: 'coredns',
  version: COREDNS_VERSION,
  module: 'github.com/coredns/coredns',
  packages: ['github.com/coredns/coredns'],
  buildHint: '3-4 min',
};
const log = (message: string) => process.stderr.write(`[node] ${message}\n`);

/** Why this machine cannot run the node, or undefined when it can. */
export function nodeUnavailableReason(): string | undefined {
  if (process.platform !== 'linux') return `a node needs Linux (this is ${process.platform})`;
  if (userInfo().uid !== 0) return 'a node needs root (containers, mounts, iptables, cgroups); run the tests as root';
  if (!existsSync('/sys/fs/cgroup')) return 'a node needs cgroups mounted at /sys/fs/cgroup';
  return undefined;
}

/** From a suite's `before`: skips the suite, saying why, on a machine that cannot run the node. */
export function skipWithoutNode(context: Mocha.Context): void {
  const reason = nodeUnavailableReason();
  if (!reason) return;
  console.log(`    skipped: ${reason}`);
  context.skip();
}

function hasCommand(command: string): boolean {
  return command.startsWith('/') ? existsSync(command) : spawnSync('sh', ['-c', `command -v ${command}`]).status === 0;
}

function runScript(script: string, args: string[], env: NodeJS.ProcessEnv = {}): void {
  const r = spawnSync('bash', [join(HERE, script), ...args], { stdio: ['ignore', 'inherit', 'inherit'], env: { ...process.env, ...env } });
  if (r.status !== 0) throw new Error(`${script} ${args.join(' ')} failed (exit ${r.status})`);
}

function shortHash(...parts: string[]): string {
  const h = createHash('sha256');
  for (const p of parts) h.update(p);
  return h.digest('hex').slice(0, 12);
}

/**
 * The npm in the base image: the release Node 22.23.3 ships with (its release notes). The npm `node` package
 * carries the official binary but not its npm, and the release notes it installs beside it do not survive
 * a later `npm install`, so the version is written here.
 */
const NPM_VERSION = '10.9.9';
/** The host's trusted certificates, which the base image trusts too (build-base-images.sh). */
const HOST_CA_BUNDLES = [process.env.NODE_EXTRA_CA_CERTS ?? '', '/etc/ssl/certs/ca-certificates.crt'].filter(Boolean);

/** The pinned Node of the npm `node` package (the official build's binary, which it links as bin/node). */
function pinnedNode(): { binary: string; version: string } {
  const pkg = join(ROOT, 'node_modules', 'node');
  if (!existsSync(join(pkg, 'bin', 'node'))) throw new Error('node_modules/node/bin/node is missing: run `npm install` first');
  const version = (JSON.parse(readFileSync(join(pkg, 'package.json'), 'utf8')) as { version: string }).version;
  return { binary: join(pkg, 'bin', 'node'), version };
}

export interface NodeArtifacts {
  /** OCI layout of local/base:base and its manifest digest. */
  base: { layout: string; digest: string };
  pause: { layout: string; digest: string };
}

function layoutDigest(layout: string): string {
  const index = JSON.parse(readFileSync(join(layout, 'index.json'), 'utf8')) as { manifests: { digest: string }[] };
  return index.manifests[0]!.digest;
}

/**
 * Installs the Debian packages and builds what the node runs, each once per version into
 * ~/.cache/tempora (minutes on a first run, with progress lines; nothing when cached): the Kubernetes
 * binaries, BuildKit, CoreDNS, the pause program, the pause image and the Debian + Node base image.
 */
export function ensureNodeArtifacts(): NodeArtifacts {
  const missing = [
    ...new Set(
      Object.entries(DEBIAN_PACKAGES)
        .filter(([cmd]) => !hasCommand(cmd))
        .map(([, pkg]) => pkg),
    ),
  ];
  if (missing.length > 0) aptInstall(...missing);
  runScript('build-binaries.sh', ['kube-apiserver', 'kube-controller-manager', 'kubelet', 'kube-scheduler', 'kube-proxy'], { K8S_VERSION });
  buildGoTool(BUILDKIT);
  buildGoTool(COREDNS);

  const images = join(cacheRoot(), 'images');
  const pauseSource = readFileSync(join(HERE, 'pause', 'main.go'), 'utf8');
  const imageScript = readFileSync(join(HERE, 'build-base-images.sh'), 'utf8');
  const pauseLayout = join(images, `pause-${shortHash(pauseSource, imageScript)}`);
  if (!existsSync(pauseLayout)) {
    const work = mkdtempSync(join(tmpdir(), 'tempora-pause-'));
    try {
      execFileSync('go', ['build', '-trimpath', '-ldflags=-s -w', '-o', join(work, 'pause'), '.'], {
        cwd: join(HERE, 'pause'),
        env: { ...process.env, CGO_ENABLED: '0' },
        stdio: ['ignore', 'inherit', 'inherit'],
      });
      runScript('build-base-images.sh', ['pause', pauseLayout, join(work, 'pause')]);
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
  }
  const node = pinnedNode();
  const caBundle = HOST_CA_BUNDLES.find((f) => existsSync(f));
  const caHash = caBundle ? shortHash(readFileSync(caBundle, 'utf8')) : 'none';
  const baseLayout = join(images, `base-bookworm-node${node.version}-npm${NPM_VERSION}-${shortHash(imageScript, caHash)}`);
  if (!existsSync(baseLayout)) {
    log(`building the base image (Debian bookworm + Node ${node.version}, npm ${NPM_VERSION}): about 2 min on a first run`);
    runScript('build-base-images.sh', ['base', baseLayout, node.binary, NPM_VERSION, ...(caBundle ? [caBundle] : [])]);
  }
  // Layouts of earlier recipes or Node versions are never used again.
  for (const entry of readdirSync(images)) {
    const path = join(images, entry);
    if (path !== baseLayout && path !== pauseLayout && /^(base|pause)-/.test(entry)) rmSync(path, { recursive: true, force: true });
  }
  return { base: { layout: baseLayout, digest: layoutDigest(baseLayout) }, pause: { layout: pauseLayout, digest: layoutDigest(pauseLayout) } };
}

interface LockRecord {
  pid: number;
  runDir: string;
  etcdDir: string;
  before: HostSnapshot;
}

function scopeOf(record: Omit<LockRecord, 'before' | 'pid'>): RestoreScope {
  return { runDir: record.runDir, processMarkers: [record.etcdDir], links: new RegExp(`^(${BRIDGE}|veth.*)$`) };
}

/**
 * One node per machine: the bridge, its subnet, the kubelet's ports and the iptables chains are host-wide.
 * A run that ended without stopping (SIGKILL, a crash) left its record: the host is put back as that run
 * found it before anything is recorded for this one.
 */
function recoverStaleRun(): void {
  if (!existsSync(LOCK_FILE)) return;
  const previous = JSON.parse(readFileSync(LOCK_FILE, 'utf8')) as LockRecord;
  if (alive(previous.pid)) throw new Error(`another node is running (pid ${previous.pid}, ${previous.runDir}); one node per machine`);
  log(`cleaning up after a node run that ended without stopping (pid ${previous.pid})`);
  const left = restoreHost(previous.before, scopeOf(previous), log);
  if (left.length > 0) log(`still differing from before that run: ${left.join('; ')}`);
  rmSync(previous.runDir, { recursive: true, force: true });
  rmSync(previous.etcdDir, { recursive: true, force: true });
  unlinkSync(LOCK_FILE);
}

function kubeletConfig(run: string, containerdSocket: string): string {
  return `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# The machine is seen as cgroup v1, without systemd.
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
# Root lacks CAP_SYS_RESOURCE here: no process may lower its oom_score_adj (real-node.md, quirk 1).
oomScoreAdj: 0
address: ${NODE_ADDRESS}
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication:
  anonymous:
    enabled: true
  webhook:
    enabled: false
authorization:
  mode: AlwaysAllow
containerRuntimeEndpoint: unix://${containerdSocket}
imageServiceEndpoint: unix://${containerdSocket}
clusterDNS: [${NODE_ADDRESS}]
clusterDomain: cluster.local
resolvConf: /etc/resolv.conf
podLogsDir: ${run}/pod-logs
volumePluginDir: ${run}/kubelet/volume-plugins
evictionHard:
  memory.available: "100Mi"
  nodefs.available: "1%"
  imagefs.available: "1%"
imageGCHighThresholdPercent: 99
imageGCLowThresholdPercent: 98
serializeImagePulls: false
# Pods' status reaches the API server within a second of changing.
nodeStatusUpdateFrequency: 4s
`;
}

function containerdConfig(run: string, root: string, socket: string): string {
  return `version = 2
root = "${root}"
state = "${run}/containerd"
[grpc]
  address = "${socket}"
[ttrpc]
  address = "${socket}.ttrpc"
[plugins]
  [plugins."io.containerd.internal.v1.opt"]
    path = "${run}/containerd-opt"
  [plugins."io.containerd.grpc.v1.cri"]
    sandbox_image = "${PAUSE_IMAGE}"
    # real-node.md, quirk 1: the sandboxes may not lower their oom_score_adj.
    restrict_oom_score_adj = true
    netns_mounts_under_state_dir = true
    [plugins."io.containerd.grpc.v1.cri".containerd]
      snapshotter = "overlayfs"
      default_runtime_name = "runc"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
          SystemdCgroup = false
          Root = "${run}/runc"
    [plugins."io.containerd.grpc.v1.cri".cni]
      bin_dir = "/usr/lib/cni"
      conf_dir = "${run}/cni/net.d"
    [plugins."io.containerd.grpc.v1.cri".registry]
      config_path = "${run}/certs.d"
`;
}

/** containerd's hosts.toml for LOCAL_REGISTRY: plain HTTP, as kind's recipe configures its node. */
function localRegistryHosts(): string {
  return `server = "http://${LOCAL_REGISTRY}"
[host."http://${LOCAL_REGISTRY}"]
  capabilities = ["pull", "resolve"]
`;
}

function cniConfig(run: string): string {
  return JSON.stringify({
    cniVersion: '1.0.0',
    name: 'tempora',
    plugins: [
      {
        type: 'bridge',
        bridge: BRIDGE,
        isGateway: true,
        // Pods get no default route, so nothing they do leaves the machine; Services go through the node.
        ipMasq: false,
        hairpinMode: true,
        ipam: {
          type: 'host-local',
          dataDir: `${run}/cni/ipam`,
          ranges: [[{ subnet: POD_CIDR, gateway: NODE_ADDRESS }]],
          routes: [{ dst: POD_CIDR }, { dst: SERVICE_CIDR, gw: NODE_ADDRESS }],
        },
      },
      { type: 'loopback' },
    ],
  });
}

function buildkitdConfig(run: string, root: string, containerdSocket: string): string {
  return `root = "${root}"
[grpc]
  address = ["unix://${run}/buildkitd.sock"]
[worker.oci]
  enabled = false
[worker.containerd]
  enabled = true
  address = "${containerdSocket}"
  namespace = "k8s.io"
  snapshotter = "overlayfs"
  # npm ci reaches the npm registry from the build's RUN steps.
  networkMode = "host"
  gc = true
  # MB of build cache kept: the dependency stages of every image (about 360 MB each, seven images) and npm's
  # cache mount. At 3000 a first run's second build of the same sources (the e2e rollout's new tag) found
  # its cache collected and ran npm ci again for every image: 12 minutes instead of seconds.
  gckeepstorage = 8000
[registry."${LOCAL_REGISTRY}"]
  http = true
`;
}

function corefile(kubeconfig: string): string {
  // Cluster names only: nothing is forwarded, as no pod reaches beyond the machine.
  return `.:53 {
    bind ${NODE_ADDRESS}
    errors
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig ${kubeconfig} tempora-test
        pods insecure
    }
    cache 5
}
`;
}

export interface BuildImageOptions {
  /** The Dockerfile, relative to the repository root (services/graph/Dockerfile). */
  dockerfile: string;
  /** Image name without registry or tag: `local/<name>`. */
  name: string;
  /** Default `test`. */
  tag?: string;
  /** Build context, relative to the repository root; default the root, as the Dockerfiles expect. */
  context?: string;
  buildArgs?: Record<string, string>;
}

export interface StartOptions {
  /** Runs once the API server is ready, before kube-controller-manager starts (ControlPlane.start). */
  beforeControllers?: () => Promise<void>;
}

export class KubeNode {
  readonly runDir: string;
  readonly controlPlane: ControlPlane;
  /** containerd's content store and BuildKit's cache, kept between runs like the binaries. */
  readonly stateDir = join(cacheRoot(), 'node');
  readonly containerdSocket: string;
  readonly buildkitSocket: string;
  /** Where `buildctl` (and buildkitd) are: put it on PATH to build with this node's BuildKit. */
  readonly buildkitBinaryDir = dirname(goToolPath(BUILDKIT, 'buildctl'));
  readonly artifacts: NodeArtifacts;
  #before: HostSnapshot | undefined;
  #children = new Map<string, ChildProcess>();
  #stopped = false;
  #exitHandler = () => this.#teardown();
  #signalHandler = (signal: NodeJS.Signals) => {
    log(`${signal}: stopping the node`);
    this.#teardown();
    process.exit(signal === 'SIGINT' ? 130 : 143);
  };

  private constructor(artifacts: NodeArtifacts) {
    this.artifacts = artifacts;
    this.runDir = mkdtempSync(join(tmpdir(), 'tempora-node-'));
    this.containerdSocket = join(this.runDir, 'containerd.sock');
    this.buildkitSocket = join(this.runDir, 'buildkitd.sock');
    this.controlPlane = new ControlPlane({ nodeAddress: NODE_ADDRESS, serviceCidr: SERVICE_CIDR, dir: join(this.runDir, 'control-plane') });
  }

  /** The admin kubeconfig (client certificate in system:masters). */
  get kubeconfigPath(): string {
    return this.controlPlane.kubeconfigPath;
  }

  get server(): string {
    return this.controlPlane.server;
  }

  /** The ClusterIP of the `kubernetes` Service, which pods' in-cluster configuration uses. */
  get kubernetesServiceIp(): string {
    return firstAddress(SERVICE_CIDR);
  }

  /**
   * Builds what is missing (see ensureNodeArtifacts), records the host's state, and starts the control
   * plane, containerd, BuildKit, CoreDNS, the kubelet, kube-proxy and kube-scheduler; resolves once the node
   * is Ready and the default ServiceAccount exists. On failure everything started is stopped again.
   */
  static async start(options: StartOptions = {}): Promise<KubeNode> {
    const reason = nodeUnavailableReason();
    if (reason) throw new Error(reason);
    const node = new KubeNode(ensureNodeArtifacts());
    try {
      await node.#start(options);
    } catch (err) {
      log(`start failed; logs in ${node.runDir}`);
      node.#teardown(true);
      throw err;
    }
    return node;
  }

  async #start(options: StartOptions): Promise<void> {
    const started = Date.now();
    const run = this.runDir;
    recoverStaleRun();
    const before = snapshotHost();
    writeFileSync(LOCK_FILE, JSON.stringify({ pid: process.pid, runDir: run, etcdDir: this.controlPlane.etcdDir, before } satisfies LockRecord), {
      flag: 'wx',
    });
    this.#before = before;
    process.on('exit', this.#exitHandler);
    process.once('SIGINT', this.#signalHandler);
    process.once('SIGTERM', this.#signalHandler);

    // The bridge exists before any pod so that the API server and the kubelet can listen on its address.
    execFileSync('ip', ['link', 'add', BRIDGE, 'type', 'bridge']);
    execFileSync('ip', ['addr', 'add', `${NODE_ADDRESS}/${POD_CIDR.split('/')[1]}`, 'dev', BRIDGE]);
    execFileSync('ip', ['link', 'set', BRIDGE, 'up']);
    // Service addresses are reached through the bridge, never through the default route: were kube-proxy
    // not (yet) translating one, the host's request would otherwise leave the machine.
    execFileSync('ip', ['route', 'add', SERVICE_CIDR, 'dev', BRIDGE, 'src', NODE_ADDRESS]);

    await this.controlPlane.start(options.beforeControllers);
    const kubeconfig = this.kubeconfigPath;

    mkdirSync(join(run, 'cni', 'net.d'), { recursive: true });
    writeFileSync(join(run, 'cni', 'net.d', '10-tempora.conflist'), cniConfig(run));
    const containerdRoot = join(this.stateDir, 'containerd');
    writeFileSync(join(run, 'containerd.toml'), containerdConfig(run, containerdRoot, this.containerdSocket));
    mkdirSync(join(run, 'certs.d', LOCAL_REGISTRY), { recursive: true });
    writeFileSync(join(run, 'certs.d', LOCAL_REGISTRY, 'hosts.toml'), localRegistryHosts());
    this.#spawn('containerd', 'containerd', ['--config', join(run, 'containerd.toml')]);
    await this.#waitUntil('containerd', () => this.#ctr(['version']).status === 0, 30_000);
    this.#forgetPreviousContainers();
    this.#importImage(PAUSE_IMAGE, this.artifacts.pause.layout, this.artifacts.pause.digest);
    this.#importImage(`docker.io/${LAYOUT_NAME}`, this.artifacts.base.layout, this.artifacts.base.digest);

    writeFileSync(join(run, 'buildkitd.toml'), buildkitdConfig(run, join(this.stateDir, 'buildkit'), this.containerdSocket));
    this.#spawn('buildkitd', goToolPath(BUILDKIT, 'buildkitd'), ['--config', join(run, 'buildkitd.toml')]);

    writeFileSync(join(run, 'Corefile'), corefile(kubeconfig));
    this.#spawn('coredns', goToolPath(COREDNS, 'coredns'), ['-conf', join(run, 'Corefile')]);

    const bin = binaryDir();
    this.#spawn('kube-scheduler', join(bin, 'kube-scheduler'), [
      `--kubeconfig=${kubeconfig}`,
      '--leader-elect=false',
      '--bind-address=127.0.0.1',
      '--secure-port=0',
    ]);
    mkdirSync(join(run, 'kubelet'), { recursive: true });
    writeFileSync(join(run, 'kubelet', 'config.yaml'), kubeletConfig(run, this.containerdSocket));
    this.#spawn('kubelet', join(bin, 'kubelet'), [
      `--config=${join(run, 'kubelet', 'config.yaml')}`,
      `--kubeconfig=${kubeconfig}`,
      `--root-dir=${join(run, 'kubelet')}`,
      `--cert-dir=${join(run, 'kubelet', 'pki')}`,
      `--hostname-override=${NODE_NAME}`,
      // real-node.md, quirk 2: the kubelet refuses a loopback node IP.
      `--node-ip=${NODE_ADDRESS}`,
    ]);
    this.#spawn('kube-proxy', join(bin, 'kube-proxy'), [
      `--kubeconfig=${kubeconfig}`,
      `--hostname-override=${NODE_NAME}`,
      '--proxy-mode=iptables',
      `--cluster-cidr=${POD_CIDR}`,
      `--healthz-bind-address=127.0.0.1:${await freePort()}`,
      `--metrics-bind-address=127.0.0.1:${await freePort()}`,
      // Leave the host's conntrack table size and timeouts, and route_localnet, as they are.
      '--conntrack-max-per-core=0',
      '--conntrack-tcp-timeout-established=0',
      '--conntrack-tcp-timeout-close-wait=0',
      '--iptables-localhost-nodeports=false',
    ]);

    await this.#waitUntil('buildkitd', () => existsSync(this.buildkitSocket), 30_000);
    await this.#waitUntil(
      `node ${NODE_NAME} Ready`,
      async () => {
        const node = await this.api<{ status?: { conditions?: { type: string; status: string }[] } }>('GET', `/api/v1/nodes/${NODE_NAME}`).catch(
          () => undefined,
        );
        return node?.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false;
      },
      120_000,
    );
    await this.waitForServiceAccount('default');
    this.#checkRunning();
    log(`node ready in ${((Date.now() - started) / 1000).toFixed(1)} s (${run})`);
  }

  /** Pods are refused until their namespace's `default` ServiceAccount exists (kube-controller-manager creates it). */
  async waitForServiceAccount(namespace: string, name = 'default'): Promise<void> {
    await waitFor(`ServiceAccount ${namespace}/${name}`, () => this.api('GET', `/api/v1/namespaces/${namespace}/serviceaccounts/${name}`), {
      timeoutMs: 60_000,
      intervalMs: 200,
    });
  }

  /**
   * Builds one of our Dockerfiles with BuildKit into containerd's k8s.io namespace, with BASE_IMAGE set to
   * the local Debian + Node base. Returns the image reference for a pod (`local/<name>:<tag>`; use
   * `imagePullPolicy: Never` or `IfNotPresent`).
   */
  async buildImage(options: BuildImageOptions): Promise<string> {
    const tag = options.tag ?? 'test';
    const ref = `local/${options.name}:${tag}`;
    const dockerfile = join(ROOT, options.dockerfile);
    const started = Date.now();
    const logFile = join(this.runDir, `build-${options.name}-${tag}.log`);
    const args = [
      `--addr=unix://${this.buildkitSocket}`,
      'build',
      '--progress=plain',
      '--frontend=dockerfile.v0',
      `--local=context=${join(ROOT, options.context ?? '.')}`,
      `--local=dockerfile=${dirname(dockerfile)}`,
      `--opt=filename=${basename(dockerfile)}`,
      ...buildctlBaseArgs(this.baseImage),
      ...Object.entries(options.buildArgs ?? {}).map(([k, v]) => `--opt=build-arg:${k}=${v}`),
      `--output=type=image,name=docker.io/${ref},unpack=true`,
    ];
    let step = 'starting';
    // A first build runs `npm ci` for a minute or two: say where it is rather than nothing.
    const progress = setInterval(() => log(`building ${ref}: ${Math.round((Date.now() - started) / 1000)} s, at ${step.slice(0, 100)}`), 15_000);
    const code = await new Promise<number>((resolve) => {
      const out = createWriteStream(logFile);
      const child = spawn(goToolPath(BUILDKIT, 'buildctl'), args, { stdio: ['ignore', 'pipe', 'pipe'] });
      child.stdout.pipe(out);
      child.stderr.pipe(out);
      child.stderr.on('data', (chunk: Buffer) => {
        const steps = chunk.toString().match(/^#\d+ \[.*$/gm);
        if (steps) step = steps.at(-1)!;
      });
      child.once('error', () => resolve(-1));
      child.once('close', (c) => resolve(c ?? -1));
    }).finally(() => clearInterval(progress));
    if (code !== 0) {
      const tail = readFileSync(logFile, 'utf8').split('\n').slice(-30).join('\n');
      throw new Error(`building ${relative(ROOT, dockerfile)} failed (exit ${code}); ${logFile}:\n${tail}`);
    }
    log(`built ${ref} from ${options.dockerfile} in ${((Date.now() - started) / 1000).toFixed(1)} s`);
    return ref;
  }

  /** The tests' Node base as `npm run release --base-image` takes it (scripts/base-image.ts). */
  get baseImage(): string {
    return `oci-layout://${this.artifacts.base.layout}@${this.artifacts.base.digest}`;
  }

  /** A request to the API server as the admin: JSON in, JSON (or text, for logs) out. */
  api<T = unknown>(method: string, path: string, body?: unknown, contentType = 'application/json'): Promise<T> {
    const { caCert, adminCert, adminKey } = this.controlPlane.credentials;
    const payload = body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body);
    return new Promise((resolve, reject) => {
      const req = request(
        {
          host: NODE_ADDRESS,
          port: this.controlPlane.apiserverPort,
          method,
          path,
          ca: caCert,
          cert: adminCert,
          key: adminKey,
          headers: { accept: 'application/json', ...(payload ? { 'content-type': contentType } : {}) },
          timeout: 30_000,
          // A connection of its own each time. Tests block the event loop in spawnSync (helm, kubectl) for
          // minutes; kube-apiserver closes a keep-alive connection idle for 90 s, and a pooled socket whose
          // close was not yet read is reused by the next call: "socket hang up" (issue 31's rollback failure,
          // reproduced with the event loop blocked 95 s; a fresh connection answered 200).
          agent: false,
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => {
            const text = Buffer.concat(chunks).toString();
            if ((res.statusCode ?? 0) >= 300) reject(new Error(`${method} ${path}: ${res.statusCode} ${text.slice(0, 500)}`));
            // Pod logs come as text.
            else resolve((res.headers['content-type']?.startsWith('application/json') ? JSON.parse(text) : text) as T);
          });
        },
      );
      req.on('error', reject);
      req.on('timeout', () => req.destroy(new Error(`${method} ${path}: timed out`)));
      req.end(payload);
    });
  }

  /** Server-side apply of any object as the admin (`kubectl apply --server-side`). */
  apply<T = unknown>(
    obj: { apiVersion: string; kind: string; metadata: { name: string; namespace?: string } },
    plural = `${obj.kind.toLowerCase()}s`,
  ): Promise<T> {
    const [group, version] = obj.apiVersion.includes('/') ? obj.apiVersion.split('/') : ['', obj.apiVersion];
    const base = group ? `/apis/${group}/${version}` : `/api/${version}`;
    const ns = obj.metadata.namespace ?? (obj.kind === 'Namespace' ? undefined : 'default');
    const path = `${base}${ns ? `/namespaces/${ns}` : ''}/${plural}/${obj.metadata.name}?fieldManager=tempora-test&force=true`;
    return this.api<T>('PATCH', path, obj, 'application/apply-patch+yaml');
  }

  /**
   * Gives a process on the host (listening on NODE_ADDRESS, or on all addresses) a Service, so that pods
   * reach it by name: a Service without selector and an EndpointSlice with the node's address. Returns
   * `host:port` for the pods (`<name>.<namespace>.svc:<port>`).
   */
  async exposeHostPort(name: string, port: number, namespace = 'default'): Promise<string> {
    const service = await this.apply<{ spec: { clusterIP: string } }>({
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name, namespace },
      spec: { ports: [{ name: 'tcp', port, targetPort: port }] },
    } as never);
    await this.apply(
      {
        apiVersion: 'discovery.k8s.io/v1',
        kind: 'EndpointSlice',
        metadata: { name, namespace, labels: { 'kubernetes.io/service-name': name, 'endpointslice.kubernetes.io/managed-by': 'tempora-test' } },
        addressType: 'IPv4',
        endpoints: [{ addresses: [NODE_ADDRESS] }],
        ports: [{ name: 'tcp', port, protocol: 'TCP' }],
      } as never,
      'endpointslices',
    );
    // A pod started before kube-proxy programs the Service would find its ClusterIP unroutable
    // (EHOSTUNREACH, seen in CI): the Service is handed out once the host reaches the process through it.
    await waitFor(`kube-proxy routing Service ${namespace}/${name}`, () => connects(service.spec.clusterIP, port), { timeoutMs: 30_000, intervalMs: 200 });
    return `${name}.${namespace}.svc:${port}`;
  }

  /**
   * What `kubectl describe` and `kubectl logs --previous` would tell about a namespace's pods that are not
   * Ready: phase, conditions, each container's state and restarts, the namespace's warning Events, and the
   * last lines each such container wrote (this run and the one before). For a wait that timed out: on a CI
   * machine the node is gone by the time anyone reads the failure.
   */
  async report(namespace: string, logLines = 25): Promise<string> {
    type ContainerStatus = {
      name: string;
      ready: boolean;
      restartCount: number;
      state?: Record<string, { reason?: string; message?: string; exitCode?: number }>;
      lastState?: Record<string, { reason?: string; exitCode?: number }>;
    };
    type Pod = {
      metadata: { name: string };
      status?: { phase?: string; conditions?: { type: string; status: string; reason?: string; message?: string }[]; containerStatuses?: ContainerStatus[] };
    };
    const lines: string[] = [];
    const tryApi = async <T>(path: string): Promise<T | string> => this.api<T>('GET', path).catch((err: unknown) => `(${String(err)})`);
    const pods = await tryApi<{ items: Pod[] }>(`/api/v1/namespaces/${namespace}/pods`);
    for (const pod of typeof pods === 'string' ? [] : pods.items) {
      const conditions = pod.status?.conditions ?? [];
      if (conditions.some((c) => c.type === 'Ready' && c.status === 'True')) continue;
      lines.push(
        `pod ${pod.metadata.name}: ${pod.status?.phase}; ${conditions.map((c) => `${c.type}=${c.status}${c.reason ? ` (${c.reason}${c.message ? `: ${c.message}` : ''})` : ''}`).join(', ')}`,
      );
      for (const c of pod.status?.containerStatuses ?? []) {
        const [state, detail] = Object.entries(c.state ?? {})[0] ?? ['unknown', {}];
        const last = Object.entries(c.lastState ?? {})[0];
        lines.push(
          `  ${c.name}: ${state}${detail.reason ? ` ${detail.reason}` : ''}${detail.message ? `: ${detail.message}` : ''}, ready ${c.ready}, ${c.restartCount} restarts${last ? `, last ${last[0]} ${last[1].reason ?? ''} exit ${last[1].exitCode ?? '?'}` : ''}`,
        );
        for (const previous of c.restartCount > 0 ? [false, true] : [false]) {
          const text = await tryApi<string>(
            `/api/v1/namespaces/${namespace}/pods/${pod.metadata.name}/log?container=${c.name}&tailLines=${logLines}${previous ? '&previous=true' : ''}`,
          );
          lines.push(
            `  ${c.name} log${previous ? ' (previous run)' : ''}:`,
            ...String(text)
              .trimEnd()
              .split('\n')
              .map((l) => `    ${l}`),
          );
        }
      }
    }
    const events = await tryApi<{ items: { type: string; reason: string; message: string; count?: number; involvedObject: { kind: string; name: string } }[] }>(
      `/api/v1/namespaces/${namespace}/events`,
    );
    if (typeof events === 'string') lines.push(`events: ${events}`);
    else
      for (const e of events.items.filter((e) => e.type === 'Warning').slice(-30))
        lines.push(`event ${e.involvedObject.kind}/${e.involvedObject.name} ${e.reason} (x${e.count ?? 1}): ${e.message}`);
    return lines.join('\n') || `every pod in ${namespace} is Ready`;
  }

  /** Stops everything and puts the host back as it was; returns what still differs (nothing, normally). */
  async stop(): Promise<string[]> {
    return this.#teardown();
  }

  #spawn(name: string, command: string, args: string[]): ChildProcess {
    // Straight into the file, not through a pipe this process drains: the tests block its event loop in
    // spawnSync (helm, kubectl wait) for minutes, and a component writing into a full pipe stops (containerd
    // did, mid-pull: every CreateContainer then timed out).
    const logFile = join(this.runDir, `${name}.log`);
    const out = openSync(logFile, 'a');
    const child = spawn(command, args, { stdio: ['ignore', out, out] });
    closeSync(out);
    child.on('error', (err) => appendFileSync(logFile, `spawn error: ${String(err)}\n`));
    this.#children.set(name, child);
    return child;
  }

  /** Throws ComponentExited with the log's end when a component has exited. */
  #checkRunning(): void {
    for (const [name, child] of this.#children) {
      if (child.exitCode === null && child.signalCode === null) continue;
      const tail = readFileSync(join(this.runDir, `${name}.log`), 'utf8')
        .split('\n')
        .slice(-15)
        .join('\n');
      throw new ComponentExited(`${name} exited (${child.exitCode ?? child.signalCode}); ${join(this.runDir, `${name}.log`)}:\n${tail}`);
    }
  }

  /** Waits for `check` while every component runs: one that exits ends the wait with its log. */
  async #waitUntil(what: string, check: () => boolean | Promise<boolean>, timeoutMs: number): Promise<void> {
    await waitFor(
      what,
      async () => {
        this.#checkRunning();
        return check();
      },
      { timeoutMs, intervalMs: 200, fatal: (error) => error instanceof ComponentExited },
    );
  }

  #ctr(args: string[], input?: Buffer) {
    return spawnSync('ctr', ['--address', this.containerdSocket, '--namespace', 'k8s.io', ...args], {
      input,
      stdio: ['pipe', 'pipe', 'pipe'],
      maxBuffer: 64 * 1024 * 1024,
    });
  }

  /** containerd's store outlives runs; the containers and sandboxes of earlier runs' pods go. */
  #forgetPreviousContainers(): void {
    const ids = this.#ctr(['containers', 'ls', '-q']).stdout.toString().split('\n').filter(Boolean);
    if (ids.length > 0) this.#ctr(['containers', 'rm', ...ids]);
  }

  #importImage(name: string, layout: string, digest: string): void {
    const listed = this.#ctr(['images', 'ls', `name==${name}`]).stdout.toString();
    if (listed.includes(digest)) return;
    const started = Date.now();
    const archive = spawnSync('tar', ['-C', layout, '-cf', '-', '.'], { maxBuffer: 2 * 1024 * 1024 * 1024 }).stdout;
    const r = this.#ctr(['images', 'import', `--base-name=${name.slice(0, name.lastIndexOf(':'))}`, '-'], archive);
    if (r.status !== 0) throw new Error(`ctr images import ${name}: ${r.stderr.toString()}`);
    log(`imported ${name} into containerd in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  }

  /** Synchronous, so that it also runs from the process's 'exit' event. */
  #teardown(keepLogs = false): string[] {
    if (this.#stopped) return [];
    this.#stopped = true;
    process.off('exit', this.#exitHandler);
    process.off('SIGINT', this.#signalHandler);
    process.off('SIGTERM', this.#signalHandler);
    const pid = (name: string) => {
      const c = this.#children.get(name);
      return c?.pid && c.exitCode === null && c.signalCode === null ? [c.pid] : [];
    };
    // The node's agents first, so that nothing restarts the pods killed next.
    killAndWait(['kubelet', 'kube-proxy', 'kube-scheduler', 'coredns', 'buildkitd'].flatMap(pid), 'SIGTERM', 5_000);
    killAndWait(pid('containerd'), 'SIGTERM', 5_000);
    killAndWait(this.controlPlane.pids, 'SIGTERM', 5_000);
    rmSync(this.controlPlane.etcdDir, { recursive: true, force: true });
    let left: string[] = [];
    if (this.#before) {
      left = restoreHost(this.#before, scopeOf({ runDir: this.runDir, etcdDir: this.controlPlane.etcdDir }), log);
      if (left.length > 0) log(`the host still differs from before the run: ${left.join('; ')}`);
      try {
        unlinkSync(LOCK_FILE);
      } catch {
        // Removed by hand.
      }
    }
    if (!keepLogs && !process.env.TEMPORA_KEEP_K8S) rmSync(this.runDir, { recursive: true, force: true });
    return left;
  }
}

/** Whether a TCP connection to host:port opens within a second. */
function connects(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host, port, timeout: 1_000 });
    const end = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.once('connect', () => end(true));
    socket.once('timeout', () => end(false));
    socket.once('error', () => end(false));
  });
}

/** A process of the node exited: nothing that waits on the node can come true any more. */
class ComponentExited extends Error {}
