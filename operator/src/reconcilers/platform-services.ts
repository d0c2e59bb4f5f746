// The platform's services a Gateway deploys, their ports (conventions.md) and how they reach each other:
// through the Services a Gateway owns, named `<gateway>-<service>`.
import { DEFAULT_PORTS } from '@tempora/kit/runtime';

/**
 * The services that exist and have an image (docs/images.md). Simulation, conductor and billing join
 * when they are built: deploying an image that does not exist would leave pods that never start.
 */
export const DEPLOYED_SERVICES = ['gateway', 'generation', 'graph'] as const;
export type PlatformService = (typeof DEPLOYED_SERVICES)[number];

export function servicePort(svc: PlatformService): number {
  return DEFAULT_PORTS[svc];
}

export function peerUrls(gatewayName: string, namespace: string, services: readonly PlatformService[]): Record<string, string> {
  return Object.fromEntries(services.map((svc) => [`${svc.toUpperCase()}_URL`, `http://${gatewayName}-${svc}.${namespace}.svc:${servicePort(svc)}`]));
}
