// An external metrics API server (KEDA's or prometheus-adapter) on the test node, as host processes: the API
// server reaches it through a Service to the host port (node.exposeHostPort) and the aggregation layer that
// control-plane.ts sets up, and the HPA controller asks it for external.metrics.k8s.io like any adapter.
import { type ChildProcess, spawn } from 'node:child_process';
import { closeSync, openSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { waitFor } from '../support/wait.ts';
import { type KubeNode, NODE_ADDRESS } from './node.ts';

const METRICS_API = 'v1beta1.external.metrics.k8s.io';

export interface HostProcess {
  /** Its log is `<name>.log` in the node's run directory. */
  name: string;
  binary: string;
  args: string[];
}

export interface ExternalMetricsServer {
  stop(): Promise<void>;
}

/**
 * Starts `processes`, registers the one listening on `securePort` as the cluster's external metrics API (its
 * Service named `service` in `namespace`), and resolves once the API is Available.
 */
export async function serveExternalMetrics(
  node: KubeNode,
  options: { namespace: string; service: string; securePort: number; processes: HostProcess[]; env?: NodeJS.ProcessEnv },
): Promise<ExternalMetricsServer> {
  const { namespace, securePort } = options;
  await node.apply({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: namespace } }, 'namespaces');
  // Files, not pipes: the tests block their event loop in spawnSync for minutes, and an undrained pipe would
  // stop a server at its next log line.
  const children: ChildProcess[] = options.processes.map(({ name, binary, args }) => {
    const log = openSync(join(node.runDir, `${name}.log`), 'a');
    const child = spawn(binary, args, { stdio: ['ignore', log, log], env: { ...process.env, ...options.env } });
    closeSync(log);
    return child;
  });
  const exited = children.map((c) => new Promise<void>((resolve) => c.once('exit', () => resolve())));
  const onExit = () => {
    for (const c of children) c.kill('SIGKILL');
  };
  // Also when the tests end without stopping them (a failed hook, Ctrl-C): nothing of the run outlives them.
  process.once('exit', onExit);
  const stop = async () => {
    process.off('exit', onExit);
    await node.api('DELETE', `/apis/apiregistration.k8s.io/v1/apiservices/${METRICS_API}`).catch(() => undefined);
    for (const c of children) c.kill('SIGTERM');
    await Promise.all(exited);
  };

  try {
    const service = (await node.exposeHostPort(options.service, securePort, namespace)).split('.')[0]!;
    // The aggregator's availability check still reads v1 Endpoints (1.33), which no controller makes for a
    // Service without selector: without them the APIService stays Available=False, EndpointsNotFound.
    await node.apply(
      {
        apiVersion: 'v1',
        kind: 'Endpoints',
        metadata: { name: service, namespace },
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
          service: { namespace, name: service, port: securePort },
          // The server's certificate is self-signed (--cert-dir without one), as the adapters' charts make it
          // unless cert-manager signs it.
          insecureSkipTLSVerify: true,
        },
      },
      'application/apply-patch+yaml',
    );
    await waitFor(
      `${options.service}: the external metrics API Available`,
      async () => {
        for (const [i, c] of children.entries())
          if (c.exitCode !== null) throw new Error(`${options.processes[i]!.name} exited; see ${node.runDir}/${options.processes[i]!.name}.log`);
        const api = await node.api<{ status?: { conditions?: { type: string; status: string }[] } }>(
          'GET',
          `/apis/apiregistration.k8s.io/v1/apiservices/${METRICS_API}`,
        );
        return api.status?.conditions?.some((c) => c.type === 'Available' && c.status === 'True');
      },
      { timeoutMs: 120_000, intervalMs: 500 },
    );
  } catch (err) {
    // The run's folder goes with the node: what the servers and the aggregator said is kept in the error.
    const status = await node
      .api<{ status?: unknown }>('GET', `/apis/apiregistration.k8s.io/v1/apiservices/${METRICS_API}`)
      .then((api) => JSON.stringify(api.status))
      .catch((e: unknown) => String(e));
    const tail = (name: string) =>
      readFileSync(join(node.runDir, `${name}.log`), 'utf8')
        .split('\n')
        .slice(-15)
        .join('\n');
    await stop();
    throw new Error(`${String(err)}\nAPIService status: ${status}\n${options.processes.map((p) => `${p.name}.log:\n${tail(p.name)}`).join('\n')}`);
  }
  return { stop };
}
