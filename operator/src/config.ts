// The operator's environment, validated at start-up: an invalid value stops it with a clear message.
import { hostname } from 'node:os';
import { z } from 'zod';

const bool = z.enum(['true', 'false']).transform((v) => v === 'true');

const EnvSchema = z.object({
  KUBECONFIG: z.string().min(1).optional(),
  OPERATOR_PORT: z.coerce.number().int().min(0).max(65535).default(8090),
  /** Watch one namespace only; unset watches all (the chart's ClusterRole). */
  WATCH_NAMESPACE: z.string().min(1).optional(),
  LEADER_ELECTION: bool.default(true),
  LEADER_ELECTION_NAMESPACE: z.string().min(1).default('tempora-system'),
  LEADER_ELECTION_ID: z.string().min(1).default('tempora-operator'),
  /** The Lease holder identity; the chart sets it to the pod name. */
  POD_NAME: z.string().min(1).default(`${hostname()}-${process.pid}`),
  WORKERS_PER_CONTROLLER: z.coerce.number().int().min(1).max(64).default(4),
  RESYNC_SECONDS: z.coerce.number().int().min(0).default(600),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  /**
   * Where the operator reaches a platform Service (today the simulation service, for the spend of each
   * SimulationBudget): `{service}` (the Service's name), `{namespace}` and `{port}` are filled in. The
   * default is the in-cluster DNS name; an operator run outside the cluster can go through `kubectl proxy`.
   */
  SERVICE_URL_TEMPLATE: z
    .string()
    .default('http://{service}.{namespace}.svc:{port}')
    .refine(
      (t) => /^https?:$/.test(URL.parse(serviceUrl(t, 'svc', 'ns', 1))?.protocol ?? ''),
      'an http(s) URL, with {service}, {namespace} and {port} where they go',
    ),
  /** How often each SimulationBudget's spend is read from its simulation service (and at every period boundary). */
  BUDGET_POLL_SECONDS: z.coerce.number().min(0.1).max(3600).default(30),
});

/** A platform Service's base URL for the operator's own calls (SERVICE_URL_TEMPLATE). */
export function serviceUrl(template: string, service: string, namespace: string, port: number): string {
  return template.replaceAll('{service}', service).replaceAll('{namespace}', namespace).replaceAll('{port}', String(port)).replace(/\/$/, '');
}

export interface OperatorConfig {
  kubeconfig: string | undefined;
  port: number;
  watchNamespace: string | undefined;
  leaderElection: boolean;
  leaderElectionNamespace: string;
  leaderElectionId: string;
  identity: string;
  workers: number;
  resyncMs: number;
  logLevel: string;
  serviceUrlTemplate: string;
  budgetPollMs: number;
}

export function loadConfig(env: NodeJS.ProcessEnv): OperatorConfig {
  const parsed = EnvSchema.safeParse(env);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `  ${i.path.join('.')}: ${i.message}`).join('\n');
    throw new ConfigError(`invalid operator environment:\n${problems}`);
  }
  const e = parsed.data;
  return {
    kubeconfig: e.KUBECONFIG,
    port: e.OPERATOR_PORT,
    watchNamespace: e.WATCH_NAMESPACE,
    leaderElection: e.LEADER_ELECTION,
    leaderElectionNamespace: e.LEADER_ELECTION_NAMESPACE,
    leaderElectionId: e.LEADER_ELECTION_ID,
    identity: e.POD_NAME,
    workers: e.WORKERS_PER_CONTROLLER,
    resyncMs: e.RESYNC_SECONDS * 1000,
    logLevel: e.LOG_LEVEL,
    serviceUrlTemplate: e.SERVICE_URL_TEMPLATE,
    budgetPollMs: Math.round(e.BUDGET_POLL_SECONDS * 1000),
  };
}

export class ConfigError extends Error {
  override name = 'ConfigError';
}
