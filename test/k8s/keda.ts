// KEDA on the test node, as its chart runs it but as two host processes: the operator, which turns each
// ScaledObject into an HPA and asks the scalers (here Prometheus) for their metric, and its metrics API
// server, an aggregated API server that serves external.metrics.k8s.io to the HPA controller from the
// operator's answers (over mTLS gRPC). Both are built from the Go module proxy like the node's other tools,
// and KEDA's CRDs come from the same module's source (config/crd/bases). The API server reaches the metrics
// server through a Service to the host port (node.exposeHostPort) and the aggregation layer that
// control-plane.ts sets up.
//
// Cold, the build downloads and compiles KEDA's every scaler's SDK (Azure, AWS, GCP, ...): see
// kedaUnavailableReason.
import { type ChildProcess, execFileSync, spawn, spawnSync } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, openSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments } from 'yaml';
import { freePort } from '../../scripts/infra.ts';
import { waitFor } from '../support/wait.ts';
import { type KubeNode, NODE_ADDRESS } from './node.ts';

const HERE = dirname(fileURLToPath(import.meta.url));
const KEDA_VERSION = 'v2.21.0';
const MODULE = 'github.com/kedacore/keda/v2';
const NAMESPACE = 'keda';
const METRICS_API = 'v1beta1.external.metrics.k8s.io';

export interface Keda {
  stop(): Promise<void>;
}

function cacheDir(): string {
  return join(process.env.TEMPORA_CACHE_DIR ?? join(homedir(), '.cache', 'tempora'), 'keda', KEDA_VERSION);
}

/**
 * Why a test should not start KEDA, or undefined. A cold build of both commands compiles about 3,450 packages
 * (every scaler's cloud SDK) and took over 46 minutes and about 7 GB of module and build cache on 2 cores, more
 * than a CI run can spend: the build happens where the binaries are cached already or TEMPORA_BUILD_KEDA=1 asks.
 */
export function kedaUnavailableReason(): string | undefined {
  if (process.env.TEMPORA_BUILD_KEDA === '1') return undefined;
  if (['operator', 'adapter'].every((b) => existsSync(join(cacheDir(), b)))) return undefined;
  return `KEDA ${KEDA_VERSION} is not built in ${cacheDir()}; TEMPORA_BUILD_KEDA=1 builds it (a cold build takes over 45 min)`;
}

/** The operator and the metrics API server, built once per version into the tests' cache. */
function binaries(): { operator: string; adapter: string } {
  const built = spawnSync('bash', [join(HERE, 'build-go-tool.sh'), 'keda', KEDA_VERSION, MODULE, `${MODULE}/cmd/operator`, `${MODULE}/cmd/adapter`], {
    stdio: ['ignore', 'inherit', 'inherit'],
    env: { ...process.env, BUILD_HINT: 'about 50 min and 7 GB' },
  });
  if (built.status !== 0) throw new Error(`building KEDA ${KEDA_VERSION} failed`);
  return { operator: join(cacheDir(), 'operator'), adapter: join(cacheDir(), 'adapter') };
}

/** KEDA's CRDs as its release ships them, from the module's source in the Go module cache (a 3 MB download, no build). */
export function crds(): Record<string, unknown>[] {
  const info = JSON.parse(execFileSync('go', ['mod', 'download', '-json', `${MODULE}@${KEDA_VERSION}`], { encoding: 'utf8' })) as { Dir: string };
  const dir = join(info.Dir, 'config', 'crd', 'bases');
  return readdirSync(dir)
    .filter((f) => f.endsWith('.yaml'))
    .flatMap((f) => parseAllDocuments(readFileSync(join(dir, f), 'utf8')).map((d) => d.toJS() as Record<string, unknown> | null))
    .filter((d): d is Record<string, unknown> => d !== null);
}

/**
 * The certificates the operator's gRPC server and the metrics server's client present to each other (both
 * read ca.crt, tls.crt and tls.key from their --cert-dir): one pair, for 127.0.0.1, under a CA of its own.
 */
function grpcCertificates(dir: string): void {
  mkdirSync(dir, { recursive: true });
  const openssl = (args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });
  openssl(['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'ca.key', '-out', 'ca.crt', '-days', '2', '-subj', '/CN=tempora-test-keda-ca']);
  writeFileSync(join(dir, 'tls.ext'), 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n');
  openssl(['req', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'tls.key', '-out', 'tls.csr', '-subj', '/CN=keda']);
  openssl(['x509', '-req', '-in', 'tls.csr', '-CA', 'ca.crt', '-CAkey', 'ca.key', '-CAcreateserial', '-out', 'tls.crt', '-days', '2', '-extfile', 'tls.ext']);
}

/** Installs KEDA's CRDs, starts its operator and metrics server, and resolves once the external metrics API is Available. */
export async function startKeda(node: KubeNode): Promise<Keda> {
  const bin = binaries();
  const admin = node.controlPlane.kubeconfigPath;
  const crdPath = (name: string) => `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${name}`;
  const names: string[] = [];
  for (const crd of crds()) {
    const name = (crd.metadata as { name: string }).name;
    names.push(name);
    await node.api('PATCH', `${crdPath(name)}?fieldManager=tempora-test&force=true`, crd, 'application/apply-patch+yaml');
  }
  // KEDA's controllers start only for kinds the API serves.
  for (const name of names)
    await waitFor(`KEDA's CRD ${name} established`, async () => {
      const crd = await node.api<{ status?: { conditions?: { type: string; status: string }[] } }>('GET', crdPath(name));
      return crd.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True');
    });
  await node.apply({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: NAMESPACE } }, 'namespaces');

  const certs = join(node.runDir, 'keda-certs');
  grpcCertificates(certs);
  const [grpcPort, securePort, operatorMetrics, adapterMetrics, probePort] = await Promise.all([freePort(), freePort(), freePort(), freePort(), freePort()]);
  // KEDA reads its own namespace from the pod's service account mount, which a host process lacks.
  const env = {
    ...process.env,
    KUBECONFIG: admin,
    WATCH_NAMESPACE: '',
    POD_NAMESPACE: NAMESPACE,
    KEDA_CLUSTER_OBJECT_NAMESPACE: NAMESPACE,
    POD_NAME: 'keda-operator',
  };
  const children: ChildProcess[] = [];
  // Files, not pipes: the tests block their event loop in spawnSync for minutes, and an undrained pipe would
  // stop KEDA at its next log line.
  const run = (name: string, binary: string, args: string[]) => {
    const log = openSync(join(node.runDir, `${name}.log`), 'a');
    const child = spawn(binary, args, { stdio: ['ignore', log, log], env });
    closeSync(log);
    children.push(child);
    return child;
  };
  run('keda-operator', bin.operator, [
    `--kubeconfig=${admin}`,
    '--leader-elect=false',
    `--metrics-bind-address=127.0.0.1:${operatorMetrics}`,
    `--health-probe-bind-address=127.0.0.1:${probePort}`,
    `--metrics-service-bind-address=127.0.0.1:${grpcPort}`,
    `--cert-dir=${certs}`,
    `--ca-dir=${certs}`,
    // The chart's cert-controller and patches are for an in-cluster install: the certificates are made above,
    // and the APIService below names its Service itself.
    '--enable-cert-rotation=false',
    '--enable-webhook-patching=false',
    '--enable-apiservice-patching=false',
  ]);
  run('keda-metrics-apiserver', bin.adapter, [
    `--lister-kubeconfig=${admin}`,
    `--authentication-kubeconfig=${admin}`,
    `--authorization-kubeconfig=${admin}`,
    `--secure-port=${securePort}`,
    `--cert-dir=${certs}`,
    `--port=${adapterMetrics}`,
    `--metrics-service-address=127.0.0.1:${grpcPort}`,
  ]);
  const exited = children.map((c) => new Promise<void>((resolve) => c.once('exit', () => resolve())));
  const onExit = () => {
    for (const c of children) c.kill('SIGKILL');
  };
  // Also when the tests end without stopping it (a failed hook, Ctrl-C): nothing of the run outlives them.
  process.once('exit', onExit);
  const stop = async () => {
    process.off('exit', onExit);
    await node.api('DELETE', `/apis/apiregistration.k8s.io/v1/apiservices/${METRICS_API}`).catch(() => undefined);
    for (const c of children) c.kill('SIGTERM');
    await Promise.all(exited);
  };

  try {
    const service = (await node.exposeHostPort('keda-metrics-apiserver', securePort, NAMESPACE)).split('.')[0]!;
    // The aggregator's availability check still reads v1 Endpoints (1.33), which no controller makes for a
    // Service without selector: without them the APIService stays Available=False, EndpointsNotFound.
    await node.apply(
      {
        apiVersion: 'v1',
        kind: 'Endpoints',
        metadata: { name: service, namespace: NAMESPACE },
        subsets: [{ addresses: [{ ip: NODE_ADDRESS }], ports: [{ name: 'tcp', port: securePort, protocol: 'TCP' }] }],
      } as never,
      'endpoints',
    );
    await node.api(
      'PATCH',
      `/apis/apiregistration.k8s.io/v1/apiservices/${METRICS_API}?fieldManager=tempora-test&force=true`,
      {
        apiVersion: 'apiregistration.k8s.io/v1',
        kind: 'APIService',
        metadata: { name: METRICS_API },
        spec: {
          group: 'external.metrics.k8s.io',
          version: 'v1beta1',
          groupPriorityMinimum: 100,
          versionPriority: 100,
          service: { namespace: NAMESPACE, name: service, port: securePort },
          // The metrics server's certificate is self-signed (--cert-dir without one), as the chart's is unless
          // cert-manager or KEDA's cert rotation signs it.
          insecureSkipTLSVerify: true,
        },
      },
      'application/apply-patch+yaml',
    );
    await waitFor(
      'KEDA: its external metrics API Available',
      async () => {
        for (const c of children) if (c.exitCode !== null) throw new Error(`KEDA exited; see ${node.runDir}/keda-*.log`);
        const api = await node.api<{ status?: { conditions?: { type: string; status: string }[] } }>(
          'GET',
          `/apis/apiregistration.k8s.io/v1/apiservices/${METRICS_API}`,
        );
        return api.status?.conditions?.some((c) => c.type === 'Available' && c.status === 'True');
      },
      { timeoutMs: 120_000, intervalMs: 500 },
    );
  } catch (err) {
    // The run's folder goes with the node: what KEDA and the aggregator said is kept in the error.
    const status = await node
      .api<{ status?: unknown }>('GET', `/apis/apiregistration.k8s.io/v1/apiservices/${METRICS_API}`)
      .then((api) => JSON.stringify(api.status))
      .catch((e: unknown) => String(e));
    const tail = (name: string) => readFileSync(join(node.runDir, name), 'utf8').split('\n').slice(-15).join('\n');
    await stop();
    throw new Error(
      `${String(err)}\nAPIService status: ${status}\n${['keda-operator.log', 'keda-metrics-apiserver.log'].map((f) => `${f}:\n${tail(f)}`).join('\n')}`,
    );
  }
  return { stop };
}
