// The platform's services a TemporaGateway deploys, their ports (conventions.md) and how they reach each other:
// through the Services a TemporaGateway owns, named `<gateway>-<service>`.
import { DEFAULT_PORTS } from '@tempora/kit/runtime';

/** The services a TemporaGateway deploys (docs/images.md): every one of conventions.md's. */
export const DEPLOYED_SERVICES = ['gateway', 'generation', 'graph', 'simulation', 'conductor', 'billing'] as const;
export type PlatformService = (typeof DEPLOYED_SERVICES)[number];

export function servicePort(svc: PlatformService): number {
  return DEFAULT_PORTS[svc];
}

export function peerUrls(gatewayName: string, namespace: string, services: readonly PlatformService[]): Record<string, string> {
  return Object.fromEntries(services.map((svc) => [`${svc.toUpperCase()}_URL`, `http://${gatewayName}-${svc}.${namespace}.svc:${servicePort(svc)}`]));
}
