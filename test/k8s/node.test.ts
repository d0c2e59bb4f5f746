// The one-node cluster of node.ts: one of our images, built from its Dockerfile with BuildKit on the local
// base, runs as a Deployment behind a Service and answers from the host through the ClusterIP and the
// cluster's DNS; after stop the host is as it was before the node started.
import assert from 'node:assert/strict';
import { Resolver } from 'node:dns/promises';
import { existsSync } from 'node:fs';
import { createServer, request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { waitFor } from '../support/wait.ts';
import { K8S_VERSION } from './control-plane.ts';
import { diffHost, type HostSnapshot, processesMentioning, snapshotHost } from './host-state.ts';
import { KubeNode, NODE_ADDRESS, skipWithoutNode } from './node.ts';

function get(url: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { timeout: 5_000 }, (res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.on('timeout', () => req.destroy(new Error(`GET ${url} timed out`)));
    req.end();
  });
}

interface Deployment {
  metadata: { generation: number };
  status?: { observedGeneration?: number; availableReplicas?: number };
}

describe('a real one-node cluster (test/k8s/node.ts)', function () {
  let node: KubeNode | undefined;
  let hostBefore: HostSnapshot;
  let runDir = '';

  before(async function () {
    skipWithoutNode(this);
    // A first run builds the Kubernetes binaries, BuildKit, CoreDNS and the base image (about 15 min on
    // 2 cores); cached, the node starts in seconds.
    this.timeout(60 * 60_000);
    hostBefore = snapshotHost();
    node = await KubeNode.start();
    runDir = node.runDir;
  });

  after(async function () {
    this.timeout(60_000);
    await node?.stop();
  });

  it("runs the graph's image from its Dockerfile as a Deployment whose Service answers /health from the host", async function () {
    this.timeout(10 * 60_000);
    const image = await node!.buildImage({ dockerfile: 'services/graph/Dockerfile', name: 'graph' });
    const labels = { app: 'graph' };
    await node!.apply(
      {
        apiVersion: 'apps/v1',
        kind: 'Deployment',
        metadata: { name: 'graph', namespace: 'default' },
        spec: {
          replicas: 1,
          selector: { matchLabels: labels },
          template: {
            metadata: { labels },
            spec: {
              securityContext: { runAsNonRoot: true, runAsUser: 1000, runAsGroup: 1000, fsGroup: 1000 },
              containers: [
                {
                  name: 'graph',
                  image,
                  imagePullPolicy: 'Never',
                  env: [{ name: 'LOG_LEVEL', value: 'warn' }],
                  ports: [{ name: 'http', containerPort: 8082 }],
                  readinessProbe: { httpGet: { path: '/health', port: 'http' }, periodSeconds: 1 },
                  securityContext: { readOnlyRootFilesystem: true, allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } },
                  // The embedded database (no DATABASE_URL) is the only thing the graph writes.
                  volumeMounts: [
                    { name: 'data', mountPath: '/var/lib/tempora' },
                    { name: 'tmp', mountPath: '/tmp' },
                  ],
                },
              ],
              volumes: [
                { name: 'data', emptyDir: {} },
                { name: 'tmp', emptyDir: {} },
              ],
            },
          },
        },
      } as never,
      'deployments',
    );
    const service = await node!.apply<{ spec: { clusterIP: string } }>({
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: 'graph', namespace: 'default' },
      spec: { selector: labels, ports: [{ name: 'http', port: 80, targetPort: 'http' }] },
    } as never);
    await waitFor(
      'the graph Deployment available',
      async () => {
        const d = await node!.api<Deployment>('GET', '/apis/apps/v1/namespaces/default/deployments/graph');
        return d.status?.observedGeneration === d.metadata.generation && d.status?.availableReplicas === 1 ? d : undefined;
      },
      { timeoutMs: 5 * 60_000, intervalMs: 250 },
    );

    // kube-proxy programs the Service's rules within a second or so of its endpoints becoming ready.
    const viaClusterIp = await waitFor('the Service answering', () => get(`http://${service.spec.clusterIP}/health`), { timeoutMs: 30_000, intervalMs: 250 });
    assert.equal(viaClusterIp.status, 200, viaClusterIp.body);
    assert.equal((JSON.parse(viaClusterIp.body) as { status: string }).status, 'ok');

    // The cluster's DNS (CoreDNS on the node's address, the pods' nameserver) names the Service.
    const dns = new Resolver();
    dns.setServers([NODE_ADDRESS]);
    assert.deepEqual(await dns.resolve4('graph.default.svc.cluster.local'), [service.spec.clusterIP]);
  });

  it("gives pods the cluster DNS, the API server through the kubernetes Service, other Services, the host's services, and their logs", async function () {
    this.timeout(2 * 60_000);
    // A process on the host, as the end-to-end tests' PostgreSQL and Redis may be, listening on the node's address.
    const hostServer = createServer((_req, res) => res.end('from the host'));
    await new Promise<void>((resolve) => hostServer.listen(0, NODE_ADDRESS, resolve));
    after(() => hostServer.close());
    const hostService = await node!.exposeHostPort('host-echo', (hostServer.address() as AddressInfo).port);
    // Run from the base image, which the node imported into containerd (the graph Service is the previous test's).
    const probe = `
      const fs = require('node:fs');
      const https = require('node:https');
      const sa = '/var/run/secrets/kubernetes.io/serviceaccount/';
      https.get('https://kubernetes.default.svc/version', { ca: fs.readFileSync(sa + 'ca.crt'), headers: { authorization: 'Bearer ' + fs.readFileSync(sa + 'token', 'utf8') } }, (res) => {
        let body = '';
        res.on('data', (c) => (body += c));
        res.on('end', async () => {
          const graph = await fetch('http://graph/health');
          const host = await fetch('http://' + process.env.HOST_SERVICE + '/');
          console.log(JSON.stringify({ api: res.statusCode, version: JSON.parse(body).gitVersion, graph: graph.status, host: await host.text() }));
        });
      }).on('error', (err) => { console.error(err); process.exit(1); });`;
    await node!.apply({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'probe', namespace: 'default' },
      spec: {
        restartPolicy: 'Never',
        containers: [
          {
            name: 'probe',
            image: 'local/base:base',
            imagePullPolicy: 'Never',
            command: ['node', '-e', probe],
            env: [{ name: 'HOST_SERVICE', value: hostService }],
            securityContext: { runAsUser: 1000 },
          },
        ],
      },
    } as never);
    const phase = await waitFor(
      'the probe pod finished',
      async () => {
        const p = await node!.api<{ status?: { phase?: string } }>('GET', '/api/v1/namespaces/default/pods/probe');
        return p.status?.phase === 'Succeeded' || p.status?.phase === 'Failed' ? p.status.phase : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 250 },
    );
    const logs = await node!.api<string>('GET', '/api/v1/namespaces/default/pods/probe/log');
    assert.equal(phase, 'Succeeded', logs);
    assert.deepEqual(JSON.parse(logs), { api: 200, version: K8S_VERSION, graph: 200, host: 'from the host' });
  });

  it('leaves the host as it was: sysctls, iptables, mounts, links, cgroups, host paths, processes', async function () {
    if (!node) this.skip();
    this.timeout(60_000);
    const left = await node.stop();
    node = undefined;
    assert.deepEqual(left, []);
    assert.deepEqual(diffHost(hostBefore, snapshotHost()), []);
    assert.deepEqual(processesMentioning(runDir), []);
    if (!process.env.TEMPORA_KEEP_K8S) assert.ok(!existsSync(runDir), `${runDir} removed`);
  });
});
