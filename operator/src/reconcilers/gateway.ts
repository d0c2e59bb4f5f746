// Gateway: the platform's root. One Deployment, Service, ConfigMap and PodDisruptionBudget per service
// (gateway and the five backends it routes to), an Ingress for the gateway, and a ServiceMonitor per
// service when the Prometheus Operator is installed.
import type { Gateway, IngressSpec, ServiceSettings } from '../api/v1alpha1/index.ts';
import type { KubeObject } from '../kube/object.ts';
import * as R from '../kube/resources.ts';
import { applyChildren } from './apply-children.ts';
import { childLabels, type DesiredChild, type Reconciler } from './context.ts';
import { updateStatus } from './status.ts';
import { PLATFORM_SERVICES, peerUrls, type PlatformService } from './platform-services.ts';
import { deploymentState, readiness } from './readiness.ts';
import {
  configMap,
  deployment,
  envFromSecretKey,
  image,
  modelSettings,
  obj,
  podDisruptionBudget,
  service,
  serviceMonitor,
} from './workload.ts';

/** Services that call model providers and so receive the provider credentials. */
const USES_PROVIDERS = new Set<PlatformService>(['generation', 'graph', 'simulation', 'conductor']);

function ingressUrl(ingress: IngressSpec): string {
  return `${ingress.tlsSecretName ? 'https' : 'http'}://${ingress.host}`;
}

/** The generation service's own settings; its image URLs go through the gateway, which routes /api/v1/timepoints to it. */
function generationSettings(spec: Gateway['spec']): Record<string, string> {
  const settings = spec.generation?.models ? modelSettings(spec.generation.models) : {};
  const publicUrl = spec.generation?.publicUrl ?? (spec.ingress ? ingressUrl(spec.ingress) : undefined);
  return publicUrl ? { ...settings, PUBLIC_URL: publicUrl } : settings;
}

export function childName(owner: KubeObject, svc: PlatformService): string {
  return `${owner.metadata.name}-${svc}`;
}

export function desiredGatewayChildren(gw: Gateway, withServiceMonitors: boolean): DesiredChild[] {
  const { spec } = gw;
  const peers = peerUrls(gw.metadata.name, gw.metadata.namespace ?? 'default', Object.keys(PLATFORM_SERVICES) as PlatformService[]);
  const children: DesiredChild[] = [];
  for (const [svc, port] of Object.entries(PLATFORM_SERVICES) as [PlatformService, number][]) {
    const name = childName(gw, svc);
    const settings: Partial<ServiceSettings> = spec.services?.[svc] ?? {};
    const config: Record<string, string> = { ...peers, LOG_LEVEL: spec.logLevel };
    if (spec.corsDomain) config.TEMPORA_DOMAIN = spec.corsDomain;
    if (svc === 'gateway') config.RATE_LIMIT_TIERS = JSON.stringify(spec.rateLimits.tiers);
    if (svc === 'generation') Object.assign(config, generationSettings(spec));
    const envFrom: Record<string, unknown>[] = [{ configMapRef: { name } }];
    if (spec.secrets?.keys) envFrom.push({ secretRef: { name: spec.secrets.keys } });
    if (spec.secrets?.providers && USES_PROVIDERS.has(svc)) envFrom.push({ secretRef: { name: spec.secrets.providers } });
    children.push(
      configMap(gw, name, svc, config),
      deployment({
        owner: gw,
        name,
        component: svc,
        image: spec.image,
        imageName: svc,
        port,
        replicas: settings.replicas,
        resources: settings.resources,
        env: [
          ...envFromSecretKey('DATABASE_URL', spec.database),
          ...envFromSecretKey('REDIS_URL', spec.redis),
          ...(svc === 'generation' ? envFromSecretKey('CALLBACK_SECRET', spec.generation?.callbackSecret) : []),
        ],
        envFrom,
        config,
      }),
      service(gw, name, svc, port),
      podDisruptionBudget(gw, name, svc, settings.maxUnavailable ?? 1),
    );
    if (withServiceMonitors) children.push(serviceMonitor(gw, name, svc));
  }
  if (spec.ingress) children.push(ingress(gw, spec.ingress));
  return children;
}

function ingress(gw: Gateway, spec: IngressSpec): DesiredChild {
  const { host, className, tlsSecretName, annotations } = spec;
  const object = obj(gw.metadata.name, childLabels(gw, 'gateway'), {
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
  });
  if (annotations) object.metadata.annotations = annotations;
  return { resource: R.Ingress, object };
}

export const gatewayReconciler: Reconciler<Gateway> = {
  resource: R.Gateway,
  async reconcile(gw, ctx) {
    const { spec } = gw;
    const applied = await applyChildren(gw, desiredGatewayChildren(gw, await ctx.features.serves(R.ServiceMonitor)), ctx);
    const { conditions, settling } = readiness(applied);
    const services = (Object.keys(PLATFORM_SERVICES) as PlatformService[]).map((svc) => {
      const live = applied.live.get(`deployments/${childName(gw, svc)}`);
      const state = live ? deploymentState(live) : undefined;
      return {
        name: svc,
        image: image(spec.image, svc),
        replicas: state?.replicas ?? 0,
        availableReplicas: state?.available ?? 0,
      };
    });
    const fields: Record<string, unknown> = { services };
    if (spec.ingress) fields.url = ingressUrl(spec.ingress);
    await updateStatus(gw, R.Gateway, { conditions, fields, settling }, ctx);
    if (applied.errors.length > 0) throw new Error(applied.errors.join('; '));
  },
};
