// The platform's services, their ports (conventions.md) and how they reach each other: through the
// Services a Gateway owns, named `<gateway>-<service>`.
import { DEFAULT_PORTS } from '@tempora/kit/runtime';

export const PLATFORM_SERVICES = DEFAULT_PORTS;
export type PlatformService = keyof typeof PLATFORM_SERVICES;

export function peerUrls(gatewayName: string, namespace: string, services: PlatformService[]): Record<string, string> {
  return Object.fromEntries(
    services.map((svc) => [`${svc.toUpperCase()}_URL`, `http://${gatewayName}-${svc}.${namespace}.svc:${PLATFORM_SERVICES[svc]}`]),
  );
}
