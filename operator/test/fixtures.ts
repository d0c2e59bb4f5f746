import { isRecord, type KubeObject } from '../src/kube/object.ts';

export const NS = 'default';

/** What a managedFields set (JSON, typed unknown) holds at `path`, e.g. `'f:spec', 'f:replicas'`; undefined where it holds nothing. */
export function fieldsAt(set: unknown, ...path: string[]): Record<string, unknown> | undefined {
  const found = path.reduce<unknown>((at, key) => (isRecord(at) ? at[key] : undefined), set);
  return isRecord(found) ? found : undefined;
}

export function gateway(name: string, spec: Record<string, unknown> = {}): KubeObject {
  return {
    apiVersion: 'tempora.dev/v1alpha1',
    kind: 'TemporaGateway',
    metadata: { name, namespace: NS },
    spec: {
      image: { version: '1.0.0' },
      ingress: { host: `${name}.tempora.test`, className: 'nginx', tlsSecretName: `${name}-tls` },
      corsDomain: 'tempora.test',
      secrets: { keys: 'tempora-keys', providers: 'tempora-providers', billing: 'tempora-billing' },
      database: { secretName: 'tempora-db' },
      redis: { secretName: 'tempora-redis' },
      services: { gateway: { replicas: 2, resources: { requests: { cpu: '0.1', memory: '128Mi' } } } },
      ...spec,
    },
  };
}

export function graphWorker(name: string, role: string, spec: Record<string, unknown> = {}): KubeObject {
  return {
    apiVersion: 'tempora.dev/v1alpha1',
    kind: 'GraphWorker',
    metadata: { name, namespace: NS },
    spec: { role, image: { version: '1.0.0' }, ...spec },
  };
}

export function agentPool(name: string, spec: Record<string, unknown> = {}): KubeObject {
  return {
    apiVersion: 'tempora.dev/v1alpha1',
    kind: 'AgentPool',
    metadata: { name, namespace: NS },
    spec: {
      image: { version: '1.0.0' },
      minReplicas: 2,
      maxReplicas: 6,
      models: {
        presets: [
          { name: 'balanced', provider: 'native', model: 'native-balanced', maxTokens: 2048 },
          { name: 'hyper', provider: 'native', model: 'native-hyper', maxTokens: 1024 },
        ],
        policy: { default: 'balanced', fallback: ['hyper'] },
      },
      providerSecrets: ['tempora-providers'],
      redis: { secretName: 'tempora-redis' },
      ...spec,
    },
  };
}

export function simulationBudget(name: string, spec: Record<string, unknown> = {}): KubeObject {
  return {
    apiVersion: 'tempora.dev/v1alpha1',
    kind: 'SimulationBudget',
    metadata: { name, namespace: NS },
    spec: { scope: 'global', limitUsd: 10, perRunMaxUsd: 1, ...spec },
  };
}

/**
 * An external-metrics adapter's registration (KEDA's metrics server, prometheus-adapter) with no server
 * behind it: being registered, even while down, is what the operator sees.
 */
export function externalMetricsApi(namespace: string, service: string): KubeObject {
  return {
    apiVersion: 'apiregistration.k8s.io/v1',
    kind: 'APIService',
    metadata: { name: 'v1beta1.external.metrics.k8s.io' },
    spec: {
      group: 'external.metrics.k8s.io',
      version: 'v1beta1',
      groupPriorityMinimum: 100,
      versionPriority: 100,
      service: { namespace, name: service, port: 443 },
      insecureSkipTLSVerify: true,
    },
  };
}
