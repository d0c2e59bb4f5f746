// The whole platform on the one-node cluster (test/k8s/node.ts), installed as a user would without Helm:
// our images built from their Dockerfiles, the CRDs and RBAC of crds/, the operator from its own image in
// tempora-system under its ServiceAccount, then custom resources for it to turn into pods. PostgreSQL and
// Redis run on the host (scripts/infra.ts) on the node's address, and pods reach them through Services
// without selectors (exposeHostPort): the shape of a managed database outside the cluster. The chart's
// in-cluster StatefulSets are exercised by test/kind/quickstart.test.ts instead.
//
// Shared by test/e2e/platform.test.ts and bench/operator/real-node.ts.

import { readdirSync } from 'node:fs';
import { request } from 'node:http';
import { join } from 'node:path';
import pg from 'pg';
import type { KubeClient } from '../../operator/src/kube/client.ts';
import type { KubeObject } from '../../operator/src/kube/object.ts';
import * as R from '../../operator/src/kube/resources.ts';
import { DEPLOYED_SERVICES } from '../../operator/src/reconcilers/platform-services.ts';
import { applyAs, CRD_DIR, clientFor, manifests } from '../../operator/test/cluster.ts';
import { startPostgres, startRedis } from '../../scripts/infra.ts';
import { KubeNode, NODE_ADDRESS, POD_CIDR } from '../k8s/node.ts';
import { type StripeStandIn, startStripeStandIn } from '../support/stand-ins/stripe.ts';
import { waitFor } from '../support/wait.ts';

export const NAMESPACE = 'tempora-e2e';
export const OPERATOR_NAMESPACE = 'tempora-system';
const log = (message: string) => process.stderr.write(`[e2e] ${message}\n`);

/** The deployables the operator runs, each built from its own Dockerfile. */
export const SERVICE_IMAGES = DEPLOYED_SERVICES.map((name) => ({ name, dockerfile: `services/${name}/Dockerfile` }));
const OPERATOR_IMAGE = { name: 'operator', dockerfile: 'operator/Dockerfile' };

/**
 * Small CPU requests: about a dozen pods share the node's 2 CPUs with the control plane (and other work on
 * the machine); what a pod uses is not capped, so starts are not slowed by throttling.
 */
export const POD_RESOURCES = { requests: { cpu: '25m', memory: '96Mi' } };

export const KEYS = {
  SERVICE_KEY: 'e2e-service-key-0123456789abcdef',
  ADMIN_KEY: 'e2e-admin-key-0123456789abcdef',
  WRITER_TOKENS: 'e2e:e2e-writer-token-0123456789abcdef',
};
/** The billing pods' payment settings (the TemporaGateway's spec.secrets.billing), against the Stripe stand-in. */
export const STRIPE_WEBHOOK_SECRET = 'whsec_e2e_0123456789abcdef';
const STRIPE_SECRET_KEY = 'sk_test_e2e_0123456789abcdef';

export interface Platform {
  node: KubeNode;
  admin: KubeClient;
  /** PostgreSQL's URL from the host (the test reads what the platform wrote). */
  databaseUrl: string;
  /**
   * The Stripe stand-in on the host, as the billing pods reach it (STRIPE_API_URL); its signed events go
   * wherever `setWebhookUrl` says (the gateway's webhook route, once the gateway has an address).
   */
  stripe: StripeStandIn;
  /** Creates an empty database and a Secret `<name>` (key `url`) naming it, for a TemporaGateway's `spec.database`. */
  newDatabase(name: string): Promise<string>;
  /** Builds every service image under another tag (layers are cached: seconds). */
  buildServiceImages(tag: string): Promise<void>;
  /** The custom resources' conditions and what is wrong with every pod not Ready (for a failed wait). */
  report(): Promise<string>;
  stop(): Promise<string[]>;
}

/**
 * Starts the node, builds the images under `tag`, installs CRDs, RBAC and the operator (from its image,
 * as its ServiceAccount), and gives the platform's namespace PostgreSQL, Redis and the Secrets a TemporaGateway
 * names: `tempora-db` and `tempora-redis` (key `url`), `tempora-keys`, `tempora-providers` (no model
 * provider: scenes render offline). Resolves once the operator is available.
 */
export async function startPlatform(tag: string): Promise<Platform> {
  const node = await KubeNode.start();
  const stops: Array<() => Promise<unknown>> = [];
  // On a signal the node stops itself and exits: PostgreSQL (pg_ctl, synchronous) and Redis (a signal) are
  // stopped from the exit event too, whose handlers cannot wait.
  const onExit = () => stops.forEach((s) => void s().catch(() => {}));
  process.on('exit', onExit);
  const stop = async () => {
    process.off('exit', onExit);
    for (const s of stops.reverse()) await s().catch((err: unknown) => log(`stop failed: ${String(err)}`));
    return node.stop();
  };
  try {
    const admin = clientFor(node.kubeconfigPath);
    const buildServiceImages = async (t: string) => {
      for (const image of SERVICE_IMAGES) await node.buildImage({ ...image, tag: t });
    };
    await buildServiceImages(tag);
    await node.buildImage({ ...OPERATOR_IMAGE, tag });

    // The bridge (and so the node's address) exists only once the node runs.
    const postgres = await startPostgres({ host: NODE_ADDRESS, allow: POD_CIDR });
    stops.push(postgres.stop);
    const redis = await startRedis({ host: NODE_ADDRESS });
    stops.push(redis.stop);
    const stripe = await startStripeStandIn({ host: NODE_ADDRESS, port: 0, webhookSecrets: [STRIPE_WEBHOOK_SECRET], secretKey: STRIPE_SECRET_KEY });
    stops.push(() => stripe.close());

    for (const name of [OPERATOR_NAMESPACE, NAMESPACE]) {
      await applyAs(admin, { apiVersion: 'v1', kind: 'Namespace', metadata: { name } });
      await node.waitForServiceAccount(name);
    }
    await installOperator(admin, tag);

    const pgUrl = new URL(postgres.url);
    const redisUrl = new URL(redis.url);
    const pgService = await node.exposeHostPort('postgresql', Number(pgUrl.port), NAMESPACE);
    const redisService = await node.exposeHostPort('redis', Number(redisUrl.port), NAMESPACE);
    const secret = (name: string, data: Record<string, string>) =>
      applyAs(admin, { apiVersion: 'v1', kind: 'Secret', metadata: { name, namespace: NAMESPACE }, type: 'Opaque', stringData: data } as KubeObject);
    await secret('tempora-db', { url: `postgres://postgres@${pgService}/postgres` });
    const newDatabase = async (name: string) => {
      const db = name.replaceAll('-', '_');
      const client = new pg.Client({ connectionString: postgres.url });
      await client.connect();
      try {
        await client.query(`CREATE DATABASE ${db}`);
      } finally {
        await client.end();
      }
      await secret(name, { url: `postgres://postgres@${pgService}/${db}` });
      return name;
    };
    await secret('tempora-redis', { url: `redis://${redisService}` });
    await secret('tempora-keys', KEYS);
    // Named by the TemporaGateway as a cluster's would be; no provider key in it, so every model call is offline.
    await secret('tempora-providers', { FREE_IMAGE_ENABLED: 'false' });
    const stripeService = await node.exposeHostPort('stripe', Number(new URL(stripe.url).port), NAMESPACE);
    await secret('tempora-billing', {
      STRIPE_SECRET_KEY,
      STRIPE_WEBHOOK_SECRET,
      STRIPE_API_URL: `http://${stripeService}`,
      CHECKOUT_SUCCESS_URL: `https://${NAMESPACE}.test/paid?session={CHECKOUT_SESSION_ID}`,
      CHECKOUT_CANCEL_URL: `https://${NAMESPACE}.test/cancelled`,
    });
    const report = async () => {
      const lines: string[] = [];
      const kinds: R.ResourceType[] = [R.TemporaGateway, R.GraphWorker, R.AgentPool, R.SimulationBudget];
      for (const type of kinds) {
        for (const o of (await admin.list(type, {}, NAMESPACE)).items) {
          const conditions = (o.status?.conditions ?? []) as { type: string; status: string; reason?: string; message?: string }[];
          lines.push(`${o.kind}/${o.metadata.name}: ${conditions.map((c) => `${c.type}=${c.status} ${c.reason ?? ''}: ${c.message ?? ''}`).join('; ')}`);
        }
      }
      for (const ns of [NAMESPACE, OPERATOR_NAMESPACE]) lines.push(await node.report(ns));
      return lines.join('\n');
    };
    return { node, admin, databaseUrl: postgres.url, stripe, newDatabase, buildServiceImages, report, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

/** crds/*.yaml, crds/rbac/, and a Deployment of the operator's image as its ServiceAccount (as the chart's). */
async function installOperator(admin: KubeClient, tag: string): Promise<void> {
  for (const file of readdirSync(CRD_DIR).filter((f) => f.endsWith('.yaml'))) {
    for (const m of manifests(join(CRD_DIR, file))) await applyAs(admin, m);
  }
  for (const crd of ['temporagateways', 'graphworkers', 'agentpools', 'simulationbudgets']) {
    await waitFor(
      `CRD ${crd}.tempora.dev established`,
      async () => {
        const obj = await admin.request<KubeObject>('GET', `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${crd}.tempora.dev`);
        return ((obj.status?.conditions ?? []) as { type: string; status: string }[]).some((c) => c.type === 'Established' && c.status === 'True');
      },
      { timeoutMs: 30_000 },
    );
  }
  for (const m of manifests(join(CRD_DIR, 'rbac', 'operator.yaml'))) await applyAs(admin, m);
  const labels = { 'app.kubernetes.io/name': 'tempora-operator' };
  await applyAs(admin, {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name: 'tempora-operator', namespace: OPERATOR_NAMESPACE, labels },
    spec: {
      replicas: 1,
      selector: { matchLabels: labels },
      template: {
        metadata: { labels },
        spec: {
          serviceAccountName: 'tempora-operator',
          terminationGracePeriodSeconds: 30,
          securityContext: { runAsNonRoot: true, runAsUser: 1000, runAsGroup: 1000, seccompProfile: { type: 'RuntimeDefault' } },
          containers: [
            {
              name: 'operator',
              image: `local/operator:${tag}`,
              imagePullPolicy: 'Never',
              env: [
                { name: 'POD_NAME', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
                { name: 'LEADER_ELECTION_NAMESPACE', valueFrom: { fieldRef: { fieldPath: 'metadata.namespace' } } },
                { name: 'LOG_LEVEL', value: 'info' },
              ],
              ports: [{ name: 'metrics', containerPort: 8090 }],
              livenessProbe: { httpGet: { path: '/healthz', port: 'metrics' }, periodSeconds: 10 },
              readinessProbe: { httpGet: { path: '/readyz', port: 'metrics' }, periodSeconds: 2 },
              resources: POD_RESOURCES,
              securityContext: { allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ['ALL'] } },
            },
          ],
        },
      },
    },
  });
  await waitFor(
    'the operator available',
    async () => {
      const d = await admin.get(R.Deployment, OPERATOR_NAMESPACE, 'tempora-operator');
      return Number((d.status as { availableReplicas?: number } | undefined)?.availableReplicas ?? 0) >= 1;
    },
    { timeoutMs: 5 * 60_000, intervalMs: 1000 },
  );
  log(`operator running from local/operator:${tag}`);
}

export interface GatewayOptions {
  /** One replica of each service unless this says more. */
  replicas?: Partial<Record<(typeof DEPLOYED_SERVICES)[number], number>>;
  /** The Secret holding the database URL; default `tempora-db`. */
  databaseSecret?: string;
  /** An Ingress for this host and IngressClass. */
  ingress?: { host: string; className: string };
  /** The users' limits (spec.rateLimits.tiers). */
  tiers?: { name: string; requestsPerMinute: number; dailyLimit?: number }[];
  /** The Secret of model provider settings (spec.secrets.providers); default `tempora-providers`. */
  providers?: string;
}

/** A TemporaGateway on the namespace's PostgreSQL, Redis and Secrets. */
export function gatewayResource(
  name: string,
  tag: string,
  { replicas = {}, databaseSecret = 'tempora-db', ingress, tiers, providers = 'tempora-providers' }: GatewayOptions = {},
): KubeObject {
  return {
    apiVersion: 'tempora.dev/v1alpha1',
    kind: 'TemporaGateway',
    metadata: { name, namespace: NAMESPACE },
    spec: {
      image: { registry: 'local', version: tag, pullPolicy: 'Never' },
      logLevel: 'info',
      secrets: { keys: 'tempora-keys', providers, billing: 'tempora-billing' },
      database: { secretName: databaseSecret },
      redis: { secretName: 'tempora-redis' },
      // One proxy appends the client's address to X-Forwarded-For: the ingress, or the test where it calls
      // the Service directly (as an ingress would).
      trustedProxies: 1,
      ...(ingress ? { ingress } : {}),
      ...(tiers ? { rateLimits: { tiers } } : {}),
      services: Object.fromEntries(DEPLOYED_SERVICES.map((svc) => [svc, { replicas: replicas[svc] ?? 1, resources: POD_RESOURCES }])),
    },
  };
}

export function graphWorkerResource(name: string, role: string, gatewayRef: string, tag: string): KubeObject {
  return {
    apiVersion: 'tempora.dev/v1alpha1',
    kind: 'GraphWorker',
    metadata: { name, namespace: NAMESPACE },
    spec: {
      role,
      gatewayRef,
      image: { registry: 'local', version: tag, pullPolicy: 'Never' },
      resources: POD_RESOURCES,
      // Offline whatever model provider the TemporaGateway's services are given.
      providersSecret: 'tempora-providers',
      ...(role === 'daily' ? {} : { replicas: 1 }),
    },
  };
}

/** `providerSecrets`: the pool's own model provider settings; unset, the TemporaGateway's. */
export function agentPoolResource(name: string, gatewayRef: string, tag: string, providerSecrets?: string[]): KubeObject {
  return {
    apiVersion: 'tempora.dev/v1alpha1',
    kind: 'AgentPool',
    metadata: { name, namespace: NAMESPACE },
    spec: {
      gatewayRef,
      image: { registry: 'local', version: tag, pullPolicy: 'Never' },
      minReplicas: 1,
      maxReplicas: 2,
      concurrency: 8,
      models: { presets: [{ name: 'balanced', provider: 'offline', model: 'offline' }], policy: { default: 'balanced' } },
      ...(providerSecrets ? { providerSecrets } : {}),
      resources: POD_RESOURCES,
    },
  };
}

/** A daily budget for every run the TemporaGateway's simulation pods make, room for many small runs. */
export function simulationBudgetResource(name: string, gatewayRef: string): KubeObject {
  return {
    apiVersion: 'tempora.dev/v1alpha1',
    kind: 'SimulationBudget',
    metadata: { name, namespace: NAMESPACE },
    spec: { gatewayRef, scope: 'global', period: 'daily', limitUsd: 5, alertThresholds: [0.5, 0.9] },
  };
}

export interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
  json<T = Record<string, unknown>>(): T;
}

/**
 * One HTTP request on a connection of its own (no keep-alive: a pooled connection to a pod that has just
 * gone would fail for reasons of the client's, not the platform's).
 */
export function call(
  url: string,
  options: { method?: string; headers?: Record<string, string>; body?: unknown; timeoutMs?: number; localAddress?: string } = {},
): Promise<Answer> {
  const payload = options.body === undefined ? undefined : JSON.stringify(options.body);
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      {
        method: options.method ?? (payload ? 'POST' : 'GET'),
        agent: false,
        ...(options.localAddress ? { localAddress: options.localAddress } : {}),
        timeout: options.timeoutMs ?? 30_000,
        headers: { accept: 'application/json', ...(payload ? { 'content-type': 'application/json' } : {}), ...options.headers },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const body = Buffer.concat(chunks).toString();
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body, json: <T>() => JSON.parse(body) as T });
        });
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.on('timeout', () => req.destroy(new Error(`${options.method ?? 'GET'} ${url} timed out`)));
    req.end(payload);
  });
}

/** The gateway's Service as the host reaches it (its ClusterIP, routed by kube-proxy). */
export async function gatewayUrl(admin: KubeClient, gateway: string): Promise<string> {
  const svc = await admin.get(R.Service, NAMESPACE, `${gateway}-gateway`);
  const spec = svc.spec as { clusterIP: string; ports: { port: number }[] };
  return `http://${spec.clusterIP}:${spec.ports[0]!.port}`;
}
