// Resolves where the API server is and how to authenticate to it with @kubernetes/client-node's
// KubeConfig (kubeconfig files, in-cluster ServiceAccount, exec plugins, auth providers, impersonation),
// and prints the result as JSON. It runs as a short-lived child process of the operator (connection.ts):
// the library loads its generated models and API classes for every Kubernetes type, about 70 MB that
// would otherwise stay resident for a file reader, half the operator's memory budget.
import type { RequestOptions } from 'node:https';
import { KubeConfig } from '@kubernetes/client-node';

export interface ResolvedCredentials {
  server: string;
  ca?: string;
  cert?: string;
  key?: string;
  rejectUnauthorized?: boolean;
  servername?: string;
  /** Request headers: Authorization, Impersonate-User. */
  headers: Record<string, string>;
}

const kc = new KubeConfig();
const path = process.argv[2];
if (path) kc.loadFromFile(path);
else kc.loadFromDefault();
const cluster = kc.getCurrentCluster();
if (!cluster) throw new Error(`${path ?? 'kubeconfig'}: no current cluster`);
const options: RequestOptions = { headers: {} };
await kc.applyToHTTPSOptions(options);
if (options.auth) throw new Error('basic authentication is not supported; use a token, a client certificate or an exec plugin');
/** client-node sets each of ca, cert and key as one PEM, a string or a Buffer (never the lists https also takes). */
const base64 = (value: unknown) => (typeof value === 'string' || Buffer.isBuffer(value) ? Buffer.from(value).toString('base64') : undefined);
const resolved: ResolvedCredentials = {
  server: cluster.server.replace(/\/$/, ''),
  ca: base64(options.ca),
  cert: base64(options.cert),
  key: base64(options.key),
  rejectUnauthorized: options.rejectUnauthorized,
  servername: options.servername,
  headers: Object.fromEntries(Object.entries(options.headers ?? {}).map(([name, value]) => [name, String(value)])),
};
process.stdout.write(JSON.stringify(resolved));
