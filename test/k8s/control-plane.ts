// A real Kubernetes control plane on loopback for tests, the way envtest runs one: etcd (Debian's
// etcd-server), kube-apiserver and kube-controller-manager (built once from the Go module proxy by
// build-binaries.sh and cached per version), with a generated CA, serving certificate, a
// client-certificate admin and a service-account signing key. No kubelet or scheduler runs: Deployments
// get ReplicaSets and Pods objects, CronJobs get Jobs, and the garbage collector deletes dependents.
// node.ts starts the same control plane with `nodeAddress` and adds a node that runs the pods.
import { type ChildProcess, execFileSync, spawn, spawnSync } from 'node:child_process';
import { appendFileSync, closeSync, existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { aptInstall, freePort } from '../../scripts/infra.ts';
import { cacheRoot } from '../support/cache.ts';

export const K8S_VERSION = process.env.K8S_VERSION ?? 'v1.33.13';
const HERE = dirname(fileURLToPath(import.meta.url));

export function binaryDir(): string {
  return join(cacheRoot(), 'k8s', K8S_VERSION);
}

/** Builds the binaries when the cache lacks them (minutes, once per machine) and installs etcd and openssl if absent. */
export function ensureBinaries(): void {
  const dir = binaryDir();
  if (!existsSync(join(dir, 'kube-apiserver')) || !existsSync(join(dir, 'kube-controller-manager'))) {
    const built = spawnSync('bash', [join(HERE, 'build-binaries.sh')], { stdio: ['ignore', 'inherit', 'inherit'], env: { ...process.env, K8S_VERSION } });
    if (built.status !== 0) throw new Error(`building Kubernetes ${K8S_VERSION} failed (exit ${built.status})`);
  }
  // etcd, and openssl for the certificates, from Debian when missing.
  const missing = [
    ['etcd', 'etcd-server'],
    ['openssl', 'openssl'],
  ]
    .filter(([cmd]) => spawnSync('sh', ['-c', `command -v ${cmd}`]).status !== 0)
    .map(([, pkg]) => pkg!);
  if (missing.length > 0) aptInstall(...missing);
}

/** The name in the aggregation layer's client certificate, the only one aggregated API servers accept headers from. */
const FRONT_PROXY_CLIENT = 'front-proxy-client';

interface Pki {
  caCert: string;
  adminCert: string;
  adminKey: string;
}

function openssl(args: string[], cwd: string): void {
  execFileSync('openssl', args, { cwd, stdio: ['ignore', 'ignore', 'pipe'] });
}

function generatePki(dir: string, extraIps: string[]): Pki {
  openssl(['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'ca.key', '-out', 'ca.crt', '-days', '2', '-subj', '/CN=tempora-test-ca'], dir);
  // The aggregation layer's own CA: the API server proxies to an aggregated API server (KEDA's metrics
  // server, test/k8s/keda.ts) with a client certificate of it, and that server trusts the user the
  // headers name only from a certificate this CA signed (Kubernetes' front-proxy, as kubeadm sets it up).
  openssl(
    [
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-keyout',
      'front-proxy-ca.key',
      '-out',
      'front-proxy-ca.crt',
      '-days',
      '2',
      '-subj',
      '/CN=tempora-test-front-proxy-ca',
    ],
    dir,
  );
  const sign = (name: string, subject: string, ext: string, ca = 'ca') => {
    writeFileSync(join(dir, `${name}.ext`), ext);
    openssl(['req', '-newkey', 'rsa:2048', '-nodes', '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', subject], dir);
    openssl(
      [
        'x509',
        '-req',
        '-in',
        `${name}.csr`,
        '-CA',
        `${ca}.crt`,
        '-CAkey',
        `${ca}.key`,
        '-CAcreateserial',
        '-out',
        `${name}.crt`,
        '-days',
        '2',
        '-extfile',
        `${name}.ext`,
      ],
      dir,
    );
  };
  sign(
    'apiserver',
    '/CN=kube-apiserver',
    `subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,IP:10.0.0.1${extraIps.map((ip) => `,IP:${ip}`).join('')}\nextendedKeyUsage=serverAuth\n`,
  );
  sign('admin', '/O=system:masters/CN=admin', 'extendedKeyUsage=clientAuth\n');
  sign('front-proxy-client', `/CN=${FRONT_PROXY_CLIENT}`, 'extendedKeyUsage=clientAuth\n', 'front-proxy-ca');
  openssl(['genrsa', '-out', 'sa.key', '2048'], dir);
  openssl(['rsa', '-in', 'sa.key', '-pubout', '-out', 'sa.pub'], dir);
  const read = (f: string) => readFileSync(join(dir, f), 'utf8');
  return { caCert: read('ca.crt'), adminCert: read('admin.crt'), adminKey: read('admin.key') };
}

export interface ControlPlaneOptions {
  /**
   * Set when a node runs pods (node.ts): the API server listens on this host address, which pods reach,
   * instead of loopback, publishes it as the `kubernetes` Service's endpoint, admits pods with their
   * ServiceAccount tokens, and kube-controller-manager keeps Endpoints and EndpointSlices.
   */
  nodeAddress?: string;
  /** The Services' range; its first address is the `kubernetes` Service's. */
  serviceCidr?: string;
  /** Directory for the control plane's files (default: a new temporary one). */
  dir?: string;
}

export class ControlPlane {
  readonly dir: string;
  readonly kubeconfigPath: string;
  readonly address: string;
  readonly #options: ControlPlaneOptions;
  // etcd fsyncs every commit; on tmpfs that is free, and a throwaway cluster loses nothing it needs
  // (etcd 3.4 has no --unsafe-no-fsync). The API server's restart test keeps etcd running, so its data
  // survives that.
  readonly etcdDir = mkdtempSync(join(existsSync('/dev/shm') ? '/dev/shm' : tmpdir(), 'tempora-etcd-'));
  apiserverPort = 0;
  #pki: Pki | undefined;
  #etcd: ChildProcess | undefined;
  #apiserver: ChildProcess | undefined;
  #controllerManager: ChildProcess | undefined;
  #etcdPort = 0;

  constructor(options: ControlPlaneOptions = {}) {
    this.#options = options;
    this.dir = options.dir ?? mkdtempSync(join(tmpdir(), 'tempora-k8s-'));
    mkdirSync(this.dir, { recursive: true });
    this.kubeconfigPath = join(this.dir, 'admin.kubeconfig');
    this.address = options.nodeAddress ?? '127.0.0.1';
  }

  get server(): string {
    return `https://${this.address}:${this.apiserverPort}`;
  }

  /** Process ids of etcd, kube-apiserver and kube-controller-manager, for a host-wide clean-up. */
  get pids(): number[] {
    return [this.#controllerManager, this.#apiserver, this.#etcd].flatMap((c) => (c?.pid && c.exitCode === null && c.signalCode === null ? [c.pid] : []));
  }

  /** The admin's CA, client certificate and key, for clients that speak to the API server directly. */
  get credentials(): Pki {
    return this.#pki!;
  }

  /**
   * `beforeControllers` runs once the API server is ready and before kube-controller-manager starts: the
   * garbage collector looks for new API resources only every 30 s, so CRDs installed there are known
   * to it from the start.
   */
  /** A started control plane; one that fails to start is stopped again, leaving nothing running. */
  static async started(options?: ConstructorParameters<typeof ControlPlane>[0]): Promise<ControlPlane> {
    const plane = new ControlPlane(options);
    try {
      await plane.start();
    } catch (err) {
      await plane.stop();
      throw err;
    }
    return plane;
  }

  async start(beforeControllers?: () => Promise<void>): Promise<void> {
    ensureBinaries();
    const serviceIp = this.#options.serviceCidr ? firstAddress(this.#options.serviceCidr) : undefined;
    this.#pki = generatePki(
      this.dir,
      [this.#options.nodeAddress, serviceIp].filter((ip): ip is string => Boolean(ip)),
    );
    this.#etcdPort = await freePort();
    const peerPort = await freePort();
    this.apiserverPort = await freePort();
    this.#etcd = this.#spawn('etcd', 'etcd', [
      '--name=default',
      `--data-dir=${this.etcdDir}`,
      `--listen-client-urls=http://127.0.0.1:${this.#etcdPort}`,
      `--advertise-client-urls=http://127.0.0.1:${this.#etcdPort}`,
      `--listen-peer-urls=http://127.0.0.1:${peerPort}`,
      `--initial-advertise-peer-urls=http://127.0.0.1:${peerPort}`,
      `--initial-cluster=default=http://127.0.0.1:${peerPort}`,
      '--quota-backend-bytes=4294967296',
    ]);
    this.#writeKubeconfig();
    await this.startApiserver();
    await beforeControllers?.();
    this.#controllerManager = this.#spawn('kube-controller-manager', join(binaryDir(), 'kube-controller-manager'), [
      `--kubeconfig=${this.kubeconfigPath}`,
      '--secure-port=0',
      '--leader-elect=false',
      `--service-account-private-key-file=${join(this.dir, 'sa.key')}`,
      `--root-ca-file=${join(this.dir, 'ca.crt')}`,
      '--use-service-account-credentials=false',
      // Without a kubelet no pod gets an address, so Endpoints and EndpointSlices would only repeat each
      // Service as empty objects: a write per Service and per Pod change that nothing here reads.
      this.#options.nodeAddress ? '--controllers=*' : '--controllers=*,-endpoints-controller,-endpointslice-controller,-endpointslice-mirroring-controller',
      // The defaults (20 requests/s) make kube-controller-manager, not the code under test, the bottleneck.
      '--kube-api-qps=400',
      '--kube-api-burst=800',
      '--concurrent-deployment-syncs=10',
      '--concurrent-replicaset-syncs=10',
      '--concurrent-gc-syncs=20',
    ]);
  }

  async startApiserver(): Promise<void> {
    const d = this.dir;
    const node = this.#options.nodeAddress;
    this.#apiserver = this.#spawn('kube-apiserver', join(binaryDir(), 'kube-apiserver'), [
      `--etcd-servers=http://127.0.0.1:${this.#etcdPort}`,
      `--bind-address=${this.address}`,
      `--advertise-address=${this.address}`,
      `--secure-port=${this.apiserverPort}`,
      `--cert-dir=${join(d, 'apiserver-certs')}`,
      `--tls-cert-file=${join(d, 'apiserver.crt')}`,
      `--tls-private-key-file=${join(d, 'apiserver.key')}`,
      `--client-ca-file=${join(d, 'ca.crt')}`,
      `--service-account-key-file=${join(d, 'sa.pub')}`,
      `--service-account-signing-key-file=${join(d, 'sa.key')}`,
      '--service-account-issuer=https://kubernetes.default.svc.cluster.local',
      `--service-cluster-ip-range=${this.#options.serviceCidr ?? '10.0.0.0/16'}`,
      '--authorization-mode=RBAC',
      '--allow-privileged=true',
      // The aggregation layer, for APIServices served by a server of their own (an external metrics server).
      // It proxies to the Service's cluster IP, which the node's kube-proxy routes from the host too; without
      // --enable-aggregator-routing, which would need v1 Endpoints that a Service to a host port lacks.
      `--requestheader-client-ca-file=${join(d, 'front-proxy-ca.crt')}`,
      `--requestheader-allowed-names=${FRONT_PROXY_CLIENT}`,
      '--requestheader-username-headers=X-Remote-User',
      '--requestheader-group-headers=X-Remote-Group',
      '--requestheader-extra-headers-prefix=X-Remote-Extra-',
      `--proxy-client-cert-file=${join(d, 'front-proxy-client.crt')}`,
      `--proxy-client-key-file=${join(d, 'front-proxy-client.key')}`,
      ...(node
        ? // The kubelet's only address is the node's (real-node.md: it refuses loopback).
          ['--kubelet-preferred-address-types=InternalIP']
        : // No kubelet creates service-account tokens here; pods are never run, only created.
          ['--disable-admission-plugins=ServiceAccount', '--endpoint-reconciler-type=none']),
    ]);
    await this.#waitReady();
  }

  /**
   * Kills the API server as a crash would (a graceful stop waits for open watches to drain); etcd keeps
   * the state, so startApiserver brings the same cluster back.
   */
  async killApiserver(): Promise<void> {
    await stopProcess(this.#apiserver, 'SIGKILL');
    this.#apiserver = undefined;
  }

  async stop(): Promise<void> {
    await stopProcess(this.#controllerManager);
    await stopProcess(this.#apiserver);
    await stopProcess(this.#etcd);
    rmSync(this.etcdDir, { recursive: true, force: true });
    if (!process.env.TEMPORA_KEEP_K8S) rmSync(this.dir, { recursive: true, force: true });
  }

  #spawn(name: string, command: string, args: string[]): ChildProcess {
    // Straight into the file, not through a pipe this process drains: a test blocking its event loop in
    // spawnSync for minutes would otherwise stop the component at its next write to the full pipe.
    const logFile = join(this.dir, `${name}.log`);
    const log = openSync(logFile, 'a');
    // Go's default GC target (100 %) spends a fifth of kube-apiserver's CPU on collection under the
    // benchmark's load; a test cluster has memory to spare.
    const child = spawn(command, args, { stdio: ['ignore', log, log], env: { ...process.env, GOGC: process.env.GOGC ?? '400' } });
    closeSync(log);
    // If the test process exits without calling stop(), take the control plane with it.
    const killOnExit = () => child.kill('SIGKILL');
    process.once('exit', killOnExit);
    child.once('exit', () => process.off('exit', killOnExit));
    child.on('error', (err) => appendFileSync(logFile, `spawn error: ${String(err)}\n`));
    return child;
  }

  /**
   * A kubeconfig for a client certificate with the given user name and groups, e.g.
   * `system:serviceaccount:<ns>:<name>` in `system:serviceaccounts` and `system:serviceaccounts:<ns>` to
   * act as a ServiceAccount's token would, under its RBAC bindings and API priority and fairness class.
   */
  kubeconfigFor(user: string, file: string, groups: string[] = []): string {
    const name = `user-${Math.random().toString(36).slice(2, 8)}`;
    writeFileSync(join(this.dir, `${name}.ext`), 'extendedKeyUsage=clientAuth\n');
    const subject = [...groups.map((g) => `/O=${g}`), `/CN=${user}`].join('');
    openssl(['req', '-newkey', 'rsa:2048', '-nodes', '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', subject], this.dir);
    openssl(
      [
        'x509',
        '-req',
        '-in',
        `${name}.csr`,
        '-CA',
        'ca.crt',
        '-CAkey',
        'ca.key',
        '-CAcreateserial',
        '-out',
        `${name}.crt`,
        '-days',
        '2',
        '-extfile',
        `${name}.ext`,
      ],
      this.dir,
    );
    const path = join(this.dir, file);
    this.#writeKubeconfig(path, readFileSync(join(this.dir, `${name}.crt`), 'utf8'), readFileSync(join(this.dir, `${name}.key`), 'utf8'));
    return path;
  }

  #writeKubeconfig(path = this.kubeconfigPath, cert = this.#pki!.adminCert, key = this.#pki!.adminKey): void {
    const b64 = (s: string) => Buffer.from(s).toString('base64');
    const pki = this.#pki!;
    writeFileSync(
      path,
      [
        'apiVersion: v1',
        'kind: Config',
        'clusters:',
        '- name: tempora-test',
        '  cluster:',
        `    server: ${this.server}`,
        `    certificate-authority-data: ${b64(pki.caCert)}`,
        'users:',
        '- name: admin',
        '  user:',
        `    client-certificate-data: ${b64(cert)}`,
        `    client-key-data: ${b64(key)}`,
        'contexts:',
        '- name: tempora-test',
        '  context: {cluster: tempora-test, user: admin, namespace: default}',
        'current-context: tempora-test',
        '',
      ].join('\n'),
    );
  }

  async #waitReady(timeoutMs = 90_000): Promise<void> {
    const pki = this.#pki!;
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const status = await new Promise<number>((resolve) => {
        const req = request(
          { host: this.address, port: this.apiserverPort, path: '/readyz', ca: pki.caCert, cert: pki.adminCert, key: pki.adminKey, timeout: 2000 },
          (res) => {
            res.resume();
            resolve(res.statusCode ?? 0);
          },
        );
        req.on('error', () => resolve(0));
        req.on('timeout', () => req.destroy());
        req.end();
      });
      if (status === 200) return;
      if (Date.now() > deadline) {
        throw new Error(`kube-apiserver not ready after ${timeoutMs} ms; see ${join(this.dir, 'kube-apiserver.log')}`);
      }
      await new Promise((r) => setTimeout(r, 250));
    }
  }
}

/** The first host address of an IPv4 range: 10.96.0.0/16 -> 10.96.0.1. */
export function firstAddress(cidr: string): string {
  const octets = cidr.split('/')[0]!.split('.').map(Number);
  octets[3]! += 1;
  return octets.join('.');
}

async function stopProcess(child: ChildProcess | undefined, signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
  if (!child || child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill(signal);
  const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
  await exited;
  clearTimeout(timer);
}
