// TemporaGateway: the platform's root. One Deployment, Service, ConfigMap and PodDisruptionBudget per service
// (the gateway and the backends it routes to), the gateway's signing key, the SimulationBudgets naming it
// in one ConfigMap that the simulation pods mount, an Ingress for the gateway, and a ServiceMonitor per
// service when the Prometheus Operator is installed.
import { generateKeyPairSync } from 'node:crypto';
import { METRICS_PORT_OFFSET } from '@tempora/kit/config';
import type { AgentPool, IngressSpec, SimulationBudget, TemporaGateway } from '../api/v1alpha1/index.ts';
import type { KubeObject, Secret } from '../kube/object.ts';
import * as R from '../kube/resources.ts';
import { applyChildren, liveChild } from './apply-children.ts';
import { type ChildFields, childLabels, type DesiredChild, type ReconcileContext, type Reconciler } from './context.ts';
import { hasExternalState, poolRedis, redisKeyPrefix, servingPool } from './gateway-ref.ts';
import { SECRET_RECHECK_MS } from './gateway-secrets.ts';
import { DEPLOYED_SERVICES, type PlatformService, peerUrls, servicePort } from './platform-services.ts';
import { type Blocked, deploymentState, readiness } from './readiness.ts';
import { budgetJson } from './simulation-budget.ts';
import { updateStatus } from './status.ts';
import {
  child,
  configMap,
  deployment,
  type EnvFromSource,
  type EnvVar,
  envFromSecretKey,
  image,
  mergePodSettings,
  modelSettings,
  podDisruptionBudget,
  type ReadOnlyVolume,
  service,
  serviceMonitor,
} from './workload.ts';

/** Services that call model providers and so receive the provider credentials. */
const USES_PROVIDERS = new Set<PlatformService>(['generation', 'graph', 'simulation', 'conductor']);

/** Where the simulation pods find the SimulationBudgets of their TemporaGateway: one `<budget>.json` per budget (SIMULATION_BUDGETS_PATH). */
export const BUDGETS_DIR = '/etc/tempora/simulation-budgets';

export function budgetsConfigMapName(gw: TemporaGateway): string {
  return `${gw.metadata.name}-simulation-budgets`;
}

/** The SimulationBudgets naming this TemporaGateway (spec.gatewayRef), by name. */
export function budgetsOf(ctx: ReconcileContext, gw: TemporaGateway): SimulationBudget[] {
  return ctx.owners.budgets
    .list()
    .filter((b) => b.metadata.namespace === gw.metadata.namespace && b.spec.gatewayRef === gw.metadata.name && !b.metadata.deletionTimestamp)
    .sort((a, b) => a.metadata.name.localeCompare(b.metadata.name));
}

/**
 * The budgets as the simulation service reads them. The pods mount this ConfigMap as a directory, not
 * key by key with subPath (a subPath mount never sees an update), and the service reads it again every
 * few seconds: a budget added, changed or removed applies without a restart. Its content is not in the
 * pods' config hash, for the same reason.
 */
function simulationBudgets(gw: TemporaGateway, budgets: SimulationBudget[]): { child: DesiredChild; volume: ReadOnlyVolume } {
  const name = budgetsConfigMapName(gw);
  const data = Object.fromEntries(budgets.map((b) => [`${b.metadata.name}.json`, budgetJson(b.spec)]));
  return {
    child: configMap(gw, name, 'simulation-budgets', data),
    volume: { name: 'budgets', mountPath: BUDGETS_DIR, source: { configMap: { name } } },
  };
}

function ingressUrl(ingress: IngressSpec): string {
  return `${ingress.tlsSecretName ? 'https' : 'http'}://${ingress.host}`;
}

/** The generation service's own settings; its image URLs go through the gateway, which routes /api/v1/timepoints to it. */
function generationSettings(spec: TemporaGateway['spec'], pool: AgentPool | undefined): Record<string, string> {
  const settings = spec.generation?.models ? modelSettings(spec.generation.models) : {};
  const publicUrl = spec.generation?.publicUrl ?? (spec.ingress ? ingressUrl(spec.ingress) : undefined);
  if (publicUrl) settings.PUBLIC_URL = publicUrl;
  // With a pool the agents run on its pods: the tasks go onto its Redis stream (REDIS_URL below).
  if (pool) Object.assign(settings, { AGENT_POOL: 'redis', AGENT_POOL_NAME: pool.metadata.name });
  return settings;
}

export function childName(owner: KubeObject, svc: PlatformService): string {
  return `${owner.metadata.name}-${svc}`;
}

/** The Secret holding the gateway's ES256 signing key (JWT_PRIVATE_KEY), created once and kept. */
export function signingKeyName(gw: TemporaGateway): string {
  return `${gw.metadata.name}-signing-key`;
}

function signingKey(gw: TemporaGateway): DesiredChild {
  return {
    ...child(R.Secret, { name: signingKeyName(gw), labels: childLabels(gw, 'gateway') }, {}),
    createWith: (): ChildFields<Secret> => {
      // With both encodings Node hands the PEMs over as strings (the public key is not used).
      const { privateKey } = generateKeyPairSync('ec', {
        namedCurve: 'P-256',
        publicKeyEncoding: { type: 'spki', format: 'pem' },
        privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
      });
      return { type: 'Opaque', stringData: { JWT_PRIVATE_KEY: privateKey } };
    },
  };
}

/** The proxies in front of the gateway whose X-Forwarded-For entries it trusts; the services behind it trust one more, itself. */
export function trustedProxies(gw: TemporaGateway): number {
  return gw.spec.trustedProxies ?? (gw.spec.ingress ? 1 : 0);
}

/** Where pods live on (nearly) every cluster network: the gateway's, and by default the ingress controller's. */
export const PRIVATE_RANGES = ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', '100.64.0.0/10', 'fc00::/7'];

/**
 * TRUSTED_PROXIES of each service: the gateway believes X-Forwarded-For from the proxies in front of it
 * (spec.trustedProxyAddresses, else the private ranges when it has any), the services behind it from the
 * gateway's pods too. The kit believes nothing by default, so a client can never pick its own address.
 */
export function trustedProxyAddresses(gw: TemporaGateway, svc: string): string {
  const front = trustedProxies(gw) > 0 ? (gw.spec.trustedProxyAddresses ?? PRIVATE_RANGES) : [];
  return (svc === 'gateway' ? front : [...new Set([...PRIVATE_RANGES, ...front])]).join(',');
}

/** Without shared state each service keeps its own, so more than one replica would split it: such a spec is refused. */
function crowdedWithoutState(gw: TemporaGateway): Blocked | undefined {
  if (hasExternalState(gw)) return undefined;
  const crowded = DEPLOYED_SERVICES.filter((svc) => (gw.spec.services?.[svc]?.replicas ?? 0) > 1);
  if (crowded.length === 0) return undefined;
  return {
    reason: 'ExternalStateRequired',
    message: `${crowded.join(', ')}: more than one replica needs spec.database and spec.redis (each replica would keep state of its own); running one`,
  };
}

/**
 * `pool`: the AgentPool serving this TemporaGateway (servingPool), whose pods run the generation service's agents.
 * `budgets`: the SimulationBudgets naming it (budgetsOf), which its simulation service enforces.
 */
export function desiredGatewayChildren(gw: TemporaGateway, withServiceMonitors: boolean, pool?: AgentPool, budgets: SimulationBudget[] = []): DesiredChild[] {
  const { spec } = gw;
  const namespace = gw.metadata.namespace ?? 'default';
  const external = hasExternalState(gw);
  const peers = peerUrls(gw.metadata.name, namespace, DEPLOYED_SERVICES);
  const hops = trustedProxies(gw);
  const budgetSource = simulationBudgets(gw, budgets);
  const children: DesiredChild[] = [signingKey(gw), budgetSource.child];
  for (const svc of DEPLOYED_SERVICES) {
    const name = childName(gw, svc);
    const port = servicePort(svc);
    const settings = spec.services?.[svc];
    const config: Record<string, string> = {
      ...peers,
      LOG_LEVEL: spec.logLevel,
      REDIS_KEY_PREFIX: redisKeyPrefix(namespace, gw.metadata.name),
      TRUSTED_PROXY_HOPS: String(svc === 'gateway' ? hops : hops + 1),
      TRUSTED_PROXIES: trustedProxyAddresses(gw, svc),
    };
    if (spec.corsDomain) config.TEMPORA_DOMAIN = spec.corsDomain;
    if (svc === 'gateway') config.RATE_LIMIT_TIERS = JSON.stringify(spec.rateLimits.tiers);
    if (svc === 'generation') Object.assign(config, generationSettings(spec, pool));
    if (svc === 'simulation') config.SIMULATION_BUDGETS_PATH = BUDGETS_DIR;
    // Later sources win: a JWT_PRIVATE_KEY in the keys Secret replaces the operator's signing key.
    const envFrom: EnvFromSource[] = [{ configMapRef: { name } }];
    if (svc === 'gateway') envFrom.push({ secretRef: { name: signingKeyName(gw) } });
    if (spec.secrets?.keys) envFrom.push({ secretRef: { name: spec.secrets.keys } });
    if (spec.secrets?.providers && USES_PROVIDERS.has(svc)) envFrom.push({ secretRef: { name: spec.secrets.providers } });
    if (spec.secrets?.billing && svc === 'billing') envFrom.push({ secretRef: { name: spec.secrets.billing } });
    const redis = svc === 'generation' && pool ? poolRedis(pool, gw) : spec.redis;
    const env: EnvVar[] = [
      ...envFromSecretKey('DATABASE_URL', spec.database),
      ...envFromSecretKey('REDIS_URL', redis),
      ...(svc === 'generation' ? envFromSecretKey('CALLBACK_SECRET', spec.generation?.callbackSecret) : []),
    ];
    children.push(
      configMap(gw, name, svc, config),
      deployment({
        owner: gw,
        name,
        component: svc,
        image: spec.image,
        imageName: svc,
        port,
        metricsPort: port + METRICS_PORT_OFFSET,
        // Embedded state is one process's: the operator then owns replicas, at most one.
        replicas: external ? settings?.replicas : Math.min(settings?.replicas ?? 1, 1),
        resources: settings?.resources,
        pods: mergePodSettings(spec.pods, settings?.pods),
        env,
        envFrom,
        tracing: spec.tracing,
        config,
        ...(svc === 'simulation' ? { volumes: [budgetSource.volume] } : {}),
      }),
      service(gw, name, svc, port),
      podDisruptionBudget(gw, name, svc, settings?.maxUnavailable ?? 1),
    );
    if (withServiceMonitors) children.push(serviceMonitor(gw, name, svc, { platformComponent: svc, monitoring: spec.monitoring }));
  }
  if (spec.ingress) children.push(ingress(gw, spec.ingress));
  return children;
}

function ingress(gw: TemporaGateway, spec: IngressSpec): DesiredChild {
  const { host, className, tlsSecretName, annotations } = spec;
  const metadata = { name: gw.metadata.name, labels: childLabels(gw, 'gateway'), ...(annotations ? { annotations } : {}) };
  return child(R.Ingress, metadata, {
    spec: {
      ...(className ? { ingressClassName: className } : {}),
      ...(tlsSecretName ? { tls: [{ hosts: [host], secretName: tlsSecretName }] } : {}),
      rules: [
        {
          host,
          http: {
            paths: [
              {
                path: '/',
                pathType: 'Prefix',
                backend: { service: { name: childName(gw, 'gateway'), port: { name: 'http' } } },
              },
            ],
          },
        },
      ],
    },
  });
}

export const gatewayReconciler: Reconciler<TemporaGateway> = {
  resource: R.TemporaGateway,
  async reconcile(gw, ctx) {
    const { spec } = gw;
    const pool = servingPool(ctx, gw);
    const [applied, missing] = await Promise.all([
      applyChildren(gw, desiredGatewayChildren(gw, await ctx.features.serves(R.ServiceMonitor), pool, budgetsOf(ctx, gw)), ctx),
      ctx.secrets.check(gw),
    ]);
    const failing = missing.length > 0 ? { reason: 'SecretMissing', message: missing.join('; ') } : undefined;
    const { conditions, settling, converging } = readiness(applied, {
      pods: ctx.pods.controlledBy(gw.metadata.uid ?? ''),
      blocked: crowdedWithoutState(gw),
      failing,
    });
    const services = DEPLOYED_SERVICES.map((svc) => {
      const live = liveChild(applied, R.Deployment, childName(gw, svc));
      const state = live ? deploymentState(live) : undefined;
      return {
        name: svc,
        image: image(spec.image, svc),
        replicas: state?.replicas ?? 0,
        availableReplicas: state?.availableReplicas ?? 0,
      };
    });
    const fields: Record<string, unknown> = { state: hasExternalState(gw) ? 'External' : 'Embedded' };
    if (spec.ingress) fields.url = ingressUrl(spec.ingress);
    // The services' images change only with the spec, which a new observedGeneration writes anyway.
    const result = await updateStatus(gw, R.TemporaGateway, { conditions, fields, counts: { services }, settling, converging }, ctx);
    if (applied.errors.length > 0) throw new Error(applied.errors.join('; '));
    // No watch tells of a Secret created or fixed (gateway-secrets.ts): look again while one is missing.
    if (failing) return { requeueAfterMs: Math.min(result?.requeueAfterMs ?? SECRET_RECHECK_MS, SECRET_RECHECK_MS) };
    return result;
  },
};
