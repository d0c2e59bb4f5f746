// A real ingress controller for the end-to-end tests: Traefik's Kubernetes Ingress provider, built from the
// Go module proxy like the node's other Go tools (test/k8s/build-go-tool.sh, cached per version), run on
// the host as an out-of-cluster controller with a ServiceAccount token of its own. It watches Ingresses of
// its IngressClass and sends each request straight to the Service's ready endpoints (pod addresses, which
// the host reaches over the node's bridge), appending the client's address to X-Forwarded-For and
// dropping what an untrusted client wrote there: what a cluster's ingress does in front of the gateway.
import { type ChildProcess, spawn } from 'node:child_process';
import { closeSync, openSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { KubeClient } from '../../operator/src/kube/client.ts';
import type { KubeObject } from '../../operator/src/kube/object.ts';
import { applyAs } from '../../operator/test/cluster.ts';
import { freePort } from '../../scripts/infra.ts';
import { buildGoTool, type GoTool, goToolPath } from '../k8s/go-tool.ts';
import type { KubeNode } from '../k8s/node.ts';
import { waitFor } from '../support/wait.ts';

/**
 * The newest release whose every module the Go module proxy serves here: v3.7's lego DNS providers and
 * its fork of go-http-auth answer 403 "not available" (docs/operator.md, "End to end").
 */
export const TRAEFIK_VERSION = 'v3.6.12';
export const INGRESS_CLASS = 'traefik';
const NAMESPACE = 'traefik';

const TRAEFIK: GoTool = {
  name: 'traefik',
  version: TRAEFIK_VERSION,
  module: 'github.com/traefik/traefik/v3',
  packages: ['github.com/traefik/traefik/v3/cmd/traefik'],
  buildHint: '10-12 min',
  extraLdflags: `-X github.com/traefik/traefik/v3/pkg/version.Version=${TRAEFIK_VERSION}`,
};

/** Builds Traefik once per version into the cache (about 11 min on 2 busy cores, 3.2 GB at its peak). */
export function ensureTraefik(): string {
  buildGoTool(TRAEFIK);
  return goToolPath(TRAEFIK, 'traefik');
}

export interface Ingress {
  /** Where clients connect: `http://127.0.0.1:<port>`, with the Ingress's host in the Host header. */
  url: string;
  stop(): Promise<void>;
}

/** Traefik's documented RBAC for the Kubernetes Ingress provider, its IngressClass, and Traefik itself on the host. */
export async function startTraefik(node: KubeNode, admin: KubeClient, binary: string): Promise<Ingress> {
  await applyAs(admin, { apiVersion: 'v1', kind: 'Namespace', metadata: { name: NAMESPACE } });
  await node.waitForServiceAccount(NAMESPACE);
  await applyAs(admin, { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: 'traefik', namespace: NAMESPACE } });
  await applyAs(admin, {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'ClusterRole',
    metadata: { name: 'traefik' },
    rules: [
      { apiGroups: [''], resources: ['services', 'secrets', 'nodes'], verbs: ['get', 'list', 'watch'] },
      { apiGroups: ['discovery.k8s.io'], resources: ['endpointslices'], verbs: ['list', 'watch'] },
      { apiGroups: ['networking.k8s.io'], resources: ['ingresses', 'ingressclasses'], verbs: ['get', 'list', 'watch'] },
      { apiGroups: ['networking.k8s.io'], resources: ['ingresses/status'], verbs: ['update'] },
    ],
  } as KubeObject);
  await applyAs(admin, {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'ClusterRoleBinding',
    metadata: { name: 'traefik' },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'traefik' },
    subjects: [{ kind: 'ServiceAccount', name: 'traefik', namespace: NAMESPACE }],
  } as KubeObject);
  // Cluster-scoped, which applyAs does not address.
  await admin.request('PATCH', `/apis/networking.k8s.io/v1/ingressclasses/${INGRESS_CLASS}`, {
    body: {
      apiVersion: 'networking.k8s.io/v1',
      kind: 'IngressClass',
      metadata: { name: INGRESS_CLASS },
      spec: { controller: 'traefik.io/ingress-controller' },
    },
    contentType: 'application/apply-patch+yaml',
    query: { fieldManager: 'test-user', force: 'true' },
  });
  const { status } = await admin.request<{ status: { token: string } }>('POST', `/api/v1/namespaces/${NAMESPACE}/serviceaccounts/traefik/token`, {
    body: { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenRequest', spec: { expirationSeconds: 24 * 3600 } },
  });
  const ca = join(node.runDir, 'traefik-ca.crt');
  writeFileSync(ca, node.controlPlane.credentials.caCert);
  const port = await freePort();
  // A file, not a pipe this process drains: the tests block their event loop in spawnSync while Traefik serves.
  const out = openSync(join(node.runDir, 'traefik.log'), 'a');
  const child: ChildProcess = spawn(
    binary,
    [
      `--entryPoints.web.address=127.0.0.1:${port}`,
      '--providers.kubernetesingress=true',
      `--providers.kubernetesingress.endpoint=${node.server}`,
      `--providers.kubernetesingress.token=${status.token}`,
      `--providers.kubernetesingress.certauthfilepath=${ca}`,
      `--providers.kubernetesingress.ingressclass=${INGRESS_CLASS}`,
      '--log.level=INFO',
    ],
    { stdio: ['ignore', out, out] },
  );
  closeSync(out);
  const exited = new Promise((resolve) => child.once('exit', resolve));
  const kill = () => child.kill('SIGKILL');
  process.on('exit', kill);
  // Traefik answers 404 for hosts it has no route for, once its entry point listens.
  await waitFor('Traefik listening', async () => (await fetch(`http://127.0.0.1:${port}/`)).status === 404, { timeoutMs: 30_000, intervalMs: 200 });
  return {
    url: `http://127.0.0.1:${port}`,
    async stop() {
      process.off('exit', kill);
      if (child.exitCode === null) {
        child.kill('SIGTERM');
        await exited;
      }
    },
  };
}
