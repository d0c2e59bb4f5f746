// Where the API server is and how to authenticate to it, and the HTTPS agents that carry the requests.
// @kubernetes/client-node resolves the kubeconfig (credentials.ts) in a child process, run once at start
// and again whenever the credentials are older than a minute: ServiceAccount tokens rotate, exec plugin
// tokens expire, and the library itself then never stays loaded in the operator (see credentials.ts).
import { execFile, execFileSync } from 'node:child_process';
import { Agent } from 'node:https';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import type { ResolvedCredentials } from './credentials.ts';

const RESOLVER = fileURLToPath(new URL('./credentials.ts', import.meta.url));
const REFRESH_MS = 60_000;

export interface Connection {
  /** The API server's base URL, e.g. https://10.0.0.1:443. */
  server: string;
  /** Pooled keep-alive connections for requests. */
  agent: Agent;
  /** Its own connections for watches, which hold theirs for minutes. */
  watchAgent: Agent;
  /** Authentication headers (Authorization, Impersonate-User), current to within a minute. */
  headers(): Promise<Record<string, string>>;
}

const resolverArgs = (kubeconfigPath: string | undefined) => [RESOLVER, ...(kubeconfigPath ? [kubeconfigPath] : [])];

function parse(stdout: string): ResolvedCredentials {
  // The resolver is this package's own script (credentials.ts), which prints exactly this shape.
  const resolved: ResolvedCredentials = JSON.parse(stdout);
  return resolved;
}

/** The given kubeconfig file, else what client-node's loadFromDefault finds (KUBECONFIG, the pod's ServiceAccount, ~/.kube/config). */
export function loadConnection(kubeconfigPath?: string): Connection {
  let resolved: ResolvedCredentials;
  try {
    resolved = parse(execFileSync(process.execPath, resolverArgs(kubeconfigPath), { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }));
  } catch (error) {
    // execFileSync's error carries the child's stderr.
    const stderr = error instanceof Error && 'stderr' in error ? String(error.stderr ?? '') : '';
    const reason = /Error: (.*)/.exec(stderr)?.[1] ?? (error instanceof Error ? error.message : String(error));
    throw new Error(`cannot connect to Kubernetes: ${reason}`);
  }
  const tls = {
    ca: resolved.ca ? Buffer.from(resolved.ca, 'base64') : undefined,
    cert: resolved.cert ? Buffer.from(resolved.cert, 'base64') : undefined,
    key: resolved.key ? Buffer.from(resolved.key, 'base64') : undefined,
    ...(resolved.rejectUnauthorized === undefined ? {} : { rejectUnauthorized: resolved.rejectUnauthorized }),
    servername: resolved.servername,
  };
  let current = { headers: resolved.headers, at: Date.now() };
  let refreshing: Promise<void> | undefined;
  const refresh = async () => {
    const { stdout } = await promisify(execFile)(process.execPath, resolverArgs(kubeconfigPath), { encoding: 'utf8' });
    current = { headers: parse(stdout).headers, at: Date.now() };
  };
  return {
    server: resolved.server,
    // Enough parallel requests for every worker's applies without a TLS handshake per request.
    agent: new Agent({ ...tls, keepAlive: true, maxSockets: 64 }),
    watchAgent: new Agent({ ...tls, keepAlive: true }),
    async headers() {
      if (Date.now() - current.at > REFRESH_MS) {
        // Concurrent requests share one refresh; a failed refresh keeps the last credentials for the next try.
        refreshing ??= refresh().finally(() => (refreshing = undefined));
        await refreshing.catch(() => undefined);
      }
      return current.headers;
    },
  };
}
