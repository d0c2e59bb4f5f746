// KEDA on the test node, as its chart runs it but as two host processes: the operator, which turns each
// ScaledObject into an HPA and asks the scalers (here Prometheus) for their metric, and its metrics API
// server, an aggregated API server that serves external.metrics.k8s.io to the HPA controller from the
// operator's answers (over mTLS gRPC). Both are built from the Go module proxy like the node's other tools,
// and KEDA's CRDs come from the same module's source (config/crd/bases). external-metrics.ts runs them and
// registers the metrics server with the API server.
//
// Cold, the build downloads and compiles KEDA's every scaler's SDK (Azure, AWS, GCP, ...): see
// kedaUnavailableReason.
import { execFileSync } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { freePort } from '../../scripts/infra.ts';
import { waitFor } from '../support/wait.ts';
import { type ExternalMetricsServer, serveExternalMetrics } from './external-metrics.ts';
import { buildGoTool, type GoTool, goToolCached, goToolPath } from './go-tool.ts';
import type { KubeNode } from './node.ts';

const KEDA_VERSION = 'v2.21.0';
const MODULE = 'github.com/kedacore/keda/v2';
/** The operator and the metrics API server. */
const KEDA: GoTool = {
  name: 'keda',
  version: KEDA_VERSION,
  module: MODULE,
  packages: [`${MODULE}/cmd/operator`, `${MODULE}/cmd/adapter`],
  buildHint: 'about 50 min and 7 GB',
};
const NAMESPACE = 'keda';

/**
 * Why a test should not start KEDA, or undefined. A cold build of both commands compiles about 3,450 packages
 * (every scaler's cloud SDK) and took over 46 minutes and about 7 GB of module and build cache on 2 cores, more
 * than a CI run can spend: the build happens where the binaries are cached already or TEMPORA_BUILD_KEDA=1 asks.
 */
export function kedaUnavailableReason(): string | undefined {
  if (process.env.TEMPORA_BUILD_KEDA === '1' || goToolCached(KEDA)) return undefined;
  return `KEDA ${KEDA_VERSION} is not built in ${dirname(goToolPath(KEDA, 'operator'))}; TEMPORA_BUILD_KEDA=1 builds it (a cold build takes over 45 min)`;
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
export async function startKeda(node: KubeNode): Promise<ExternalMetricsServer> {
  buildGoTool(KEDA);
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
  const certs = join(node.runDir, 'keda-certs');
  grpcCertificates(certs);
  const [grpcPort, securePort, operatorMetrics, adapterMetrics, probePort] = await Promise.all([freePort(), freePort(), freePort(), freePort(), freePort()]);
  return serveExternalMetrics(node, {
    namespace: NAMESPACE,
    service: 'keda-metrics-apiserver',
    securePort,
    // KEDA reads its own namespace from the pod's service account mount, which a host process lacks.
    env: { KUBECONFIG: admin, WATCH_NAMESPACE: '', POD_NAMESPACE: NAMESPACE, KEDA_CLUSTER_OBJECT_NAMESPACE: NAMESPACE, POD_NAME: 'keda-operator' },
    processes: [
      {
        name: 'keda-operator',
        binary: goToolPath(KEDA, 'operator'),
        args: [
          `--kubeconfig=${admin}`,
          '--leader-elect=false',
          `--metrics-bind-address=127.0.0.1:${operatorMetrics}`,
          `--health-probe-bind-address=127.0.0.1:${probePort}`,
          `--metrics-service-bind-address=127.0.0.1:${grpcPort}`,
          `--cert-dir=${certs}`,
          `--ca-dir=${certs}`,
          // The chart's cert-controller and patches are for an in-cluster install: the certificates are made
          // above, and serveExternalMetrics registers the APIService itself.
          '--enable-cert-rotation=false',
          '--enable-webhook-patching=false',
          '--enable-apiservice-patching=false',
        ],
      },
      {
        name: 'keda-metrics-apiserver',
        binary: goToolPath(KEDA, 'adapter'),
        args: [
          `--lister-kubeconfig=${admin}`,
          `--authentication-kubeconfig=${admin}`,
          `--authorization-kubeconfig=${admin}`,
          `--secure-port=${securePort}`,
          `--cert-dir=${certs}`,
          `--port=${adapterMetrics}`,
          `--metrics-service-address=127.0.0.1:${grpcPort}`,
        ],
      },
    ],
  });
}
