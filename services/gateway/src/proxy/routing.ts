/** The routing table: which backend serves each proxied path. */

export const UPSTREAMS = ['generation', 'graph', 'billing', 'simulation', 'conductor'] as const;
export type UpstreamName = (typeof UPSTREAMS)[number];

/** Where an upstream is, and the X-Service-Key the gateway presents to it. */
export interface UpstreamTarget {
  url: string;
  serviceKey: string | undefined;
}

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

/** The graph's MCP server on the public host (Streamable HTTP: JSON-RPC POSTs), forwarded to the graph's same path. */
export const GRAPH_MCP_PATH = '/api/v1/graph/mcp';
const isGraphMcp = (path: string) => path === GRAPH_MCP_PATH || path === `${GRAPH_MCP_PATH}/`;
/** A scene's image on the generation service (docs/generation.md, "Images"). */
const SCENE_IMAGE = /^\/api\/v1\/timepoints\/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\/image$/i;
const isRead = (method: string) => method === 'GET' || method === 'HEAD';

/**
 * What anyone may ask without a credential, forwarded without identity or service key: the graph's public
 * reads, its MCP server (the free read tools; gen_render needs a credential the graph checks itself) and
 * scenes' images (the generation service serves public ones and answers 404 for private ones).
 */
export function isOpen(upstream: UpstreamName, method: string, path: string): boolean {
  if (upstream === 'graph') return isRead(method) || isGraphMcp(path);
  return upstream === 'generation' && isRead(method) && SCENE_IMAGE.test(path);
}

/**
 * Whether a request only reads, whatever its method: GET and HEAD, and the graph's MCP server, whose POSTs
 * offer users nothing but reads (gen_render needs a writer token or the graph's service key, which no
 * user of the gateway holds). A read-only API key may make them.
 */
export const readsOnly = (method: string, path: string): boolean => isRead(method) || isGraphMcp(path);

/**
 * Whether a call answers only once a whole render is done, and so gets SYNC_GENERATION_TIMEOUT_MS rather
 * than UPSTREAM_TIMEOUT_MS to answer: the synchronous generation.
 */
export const holdsForRender = (upstream: UpstreamName, method: string, path: string): boolean =>
  upstream === 'generation' && method === 'POST' && SYNC_GENERATION.test(path);
const SYNC_GENERATION = /^\/api\/v1\/timepoints\/generate\/sync\/?$/;

/** Undefined outside /api/v1/, `native` for the gateway's own paths, else the upstream. */
export function routeOf(path: string): UpstreamName | 'native' | undefined {
  if (!path.startsWith('/api/v1/')) return undefined;
  const entry = TABLE.find(([prefix]) => path === prefix || path.startsWith(`${prefix}/`));
  return entry ? entry[1] : 'generation';
}
