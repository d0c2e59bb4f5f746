/** The routing table: which backend serves each proxied path. */

export const UPSTREAMS = ['generation', 'graph', 'billing', 'simulation', 'conductor'] as const;
export type UpstreamName = (typeof UPSTREAMS)[number];

/** The route label of proxied requests in the request metrics, per upstream. */
export const PROXY_ROUTE = Object.fromEntries(UPSTREAMS.map((name) => [name, `proxy:${name}`])) as Record<UpstreamName, string>;

/** Path prefixes and who serves them; any other /api/v1/ path goes to the generation service. */
const TABLE: ReadonlyArray<readonly [prefix: string, destination: UpstreamName | 'native']> = [
  ['/api/v1/auth', 'native'],
  ['/api/v1/users', 'native'],
  ['/api/v1/credits', 'native'],
  ['/api/v1/graph', 'graph'],
  ['/api/v1/billing', 'billing'],
  ['/api/v1/simulate', 'simulation'],
  ['/api/v1/simulations', 'simulation'],
  ['/api/v1/conductor', 'conductor'],
];

/** Undefined outside /api/v1/, `native` for the gateway's own paths, else the upstream. */
export function routeOf(path: string): UpstreamName | 'native' | undefined {
  if (!path.startsWith('/api/v1/')) return undefined;
  const entry = TABLE.find(([prefix]) => path === prefix || path.startsWith(`${prefix}/`));
  return entry ? entry[1] : 'generation';
}
