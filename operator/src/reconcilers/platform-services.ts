// The platform's services, their ports (conventions.md) and how they reach each other: through the
// Services a Gateway owns, named `<gateway>-<service>`.

export const PLATFORM_SERVICES = {
  gateway: 8080,
  generation: 8081,
  graph: 8082,
  simulation: 8083,
  conductor: 8084,
  billing: 8085,
} as const;
export type PlatformService = keyof typeof PLATFORM_SERVICES;

export function peerUrls(gatewayName: string, namespace: string, services: PlatformService[]): Record<string, string> {
  return Object.fromEntries(
    services.map((svc) => [`${svc.toUpperCase()}_URL`, `http://${gatewayName}-${svc}.${namespace}.svc:${PLATFORM_SERVICES[svc]}`]),
  );
}
