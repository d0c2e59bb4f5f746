// prometheus-adapter on the test node, as its chart runs it but as a host process: an aggregated API server
// that answers external.metrics.k8s.io from PromQL, with the rules the platform chart ships
// (charts/tempora/files/prometheus-adapter-values.yaml). Built from the Go module proxy like the node's other
// tools; external-metrics.ts registers it with the API server.
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse, stringify } from 'yaml';
import { freePort } from '../../scripts/infra.ts';
import { type ExternalMetricsServer, serveExternalMetrics } from './external-metrics.ts';
import { buildGoTool, type GoTool, goToolPath } from './go-tool.ts';
import type { KubeNode } from './node.ts';

const HERE = dirname(fileURLToPath(import.meta.url));
const MODULE = 'sigs.k8s.io/prometheus-adapter';
const ADAPTER: GoTool = { name: 'prometheus-adapter', version: 'v0.12.0', module: MODULE, packages: [`${MODULE}/cmd/adapter`], buildHint: 'about 10 min' };
/** The values the platform chart ships for the prometheus-community/prometheus-adapter chart. */
const SHIPPED_VALUES = join(HERE, '..', '..', 'charts', 'tempora', 'files', 'prometheus-adapter-values.yaml');

/**
 * Starts prometheus-adapter against `prometheusUrl` with the shipped rules (the chart's `rules.external` is the
 * adapter's `externalRules`), and resolves once the external metrics API is Available.
 */
export async function startPrometheusAdapter(node: KubeNode, prometheusUrl: string): Promise<ExternalMetricsServer> {
  buildGoTool(ADAPTER);
  const adapter = goToolPath(ADAPTER, 'adapter');
  const values = parse(readFileSync(SHIPPED_VALUES, 'utf8')) as { rules: { external: unknown[] } };
  const config = join(node.runDir, 'prometheus-adapter.yaml');
  writeFileSync(config, stringify({ externalRules: values.rules.external }));
  const kubeconfig = node.controlPlane.kubeconfigPath;
  const securePort = await freePort();
  return serveExternalMetrics(node, {
    namespace: 'monitoring',
    service: 'prometheus-adapter',
    securePort,
    processes: [
      {
        name: 'prometheus-adapter',
        binary: adapter,
        args: [
          `--lister-kubeconfig=${kubeconfig}`,
          `--authentication-kubeconfig=${kubeconfig}`,
          `--authorization-kubeconfig=${kubeconfig}`,
          `--secure-port=${securePort}`,
          `--cert-dir=${join(node.runDir, 'prometheus-adapter-certs')}`,
          `--prometheus-url=${prometheusUrl}`,
          `--config=${config}`,
          // The chart's default is 1m; series appear within seconds here so that the test takes minutes.
          '--metrics-relist-interval=5s',
        ],
      },
    ],
  });
}
