import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type RequestListener } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { type RunningServer, serve } from '@tempora/kit/http';
import { createLogger } from '@tempora/kit/observability';
import { loadConfig } from '@tempora/kit/runtime';
import { createDatabase, dropDatabase } from '../../../test/support/database.ts';
import { type Reply, request } from '../../../test/support/http.ts';
import { GatewayConfigSchema } from '../../gateway/src/config.ts';
import { createGatewayService } from '../../gateway/src/service.ts';
import { SERVICE_KEY as GENERATION_KEY, type GenerationHarness, startGeneration } from '../../generation/test/harness.ts';
import { SERVICE_KEY as GRAPH_KEY, type GraphHarness, startGraph, writer } from '../../graph/test/harness.ts';
import { ConductorConfigSchema } from '../src/config.ts';
import { type ConductorInstance, createConductorService } from '../src/service.ts';

export const GATEWAY_KEY = 'gateway-service-key-0123456789';
export const CONDUCTOR_KEY = 'conductor-service-key-0123456789';
export const ADMIN_KEY = 'admin-key-0123456789';

/**
 * An HTTP server bound at once to a port the system picks (no other process can take it in between), that
 * answers once it is given its handler: the gateway, which the conductor must know the address of before
 * the gateway can be made (each names the other). Until then it answers 503; never given one, it is a peer
 * that is down.
 */
async function boundAtOnce() {
  let handler: RequestListener | undefined;
  const server = createServer((request, response) => (handler ? handler(request, response) : response.writeHead(503).end()));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    answer: (given: RequestListener) => {
      handler = given;
    },
    close: () => {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAllConnections();
      return closed;
    },
  };
}

type BoundServer = Awaited<ReturnType<typeof boundAtOnce>>;

/**
 * The seed's moments from 1770 to 1830 and the curated edges among them: the Bastille, the coronation of
 * 1804 and Waterloo with the chain that joins them, as `npm start` seeds them.
 */
export function napoleonicRecords() {
  const seed = (file: string) => JSON.parse(readFileSync(new URL(`../../graph/seed/${file}`, import.meta.url), 'utf8')) as Array<Record<string, any>>;
  const moments = seed('moments-modern.json').filter((moment) => {
    const year = Number(String(moment.path).split('/')[1]);
    return year >= 1770 && year <= 1830;
  });
  const paths = new Set(moments.map((moment) => moment.path as string));
  const edges = seed('edges-modern.json').filter((edge) => paths.has(edge.source) && paths.has(edge.target));
  return moments.map((moment) => ({
    payload: { ...moment, edges: edges.filter((edge) => edge.source === moment.path).map(({ source: _, ...edge }) => edge) },
  }));
}

export const BASTILLE = '/1789/july/14/1530/france/ile-de-france/paris/storming-of-the-bastille';
export const WATERLOO = '/1815/june/18/1200/belgium/walloon-brabant/waterloo/battle-of-waterloo';
export const CORONATION = '/1804/december/2/1200/france/ile-de-france/paris/coronation-of-napoleon';
export const README_REQUEST =
  'Show me what led from the Bastille to Waterloo, then render the coronation of 1804 and simulate what would have happened had the Continental System failed in 1807';

export interface User {
  id: string;
  token: string;
  headers: Record<string, string>;
}

export interface Platform {
  gateway: { url: string; close(): Promise<void> };
  graph: GraphHarness;
  generation: GenerationHarness;
  conductor: StartedConductor;
  /** A new user, with `credits` on top of the signup grant taken back (so the balance is exactly `credits`). */
  user(credits: number): Promise<User>;
  balance(user: User): Promise<number>;
  history(user: User): Promise<Array<{ amount: number; kind: string; operation: string | null; idempotency_key: string }>>;
  /** POST /api/v1/conductor/messages directly at the conductor. */
  send<T = any>(user: User, body: Record<string, unknown>): Promise<Reply<T>>;
  call<T = any>(base: 'conductor' | 'gateway', method: string, path: string, init?: { headers?: Record<string, string>; body?: unknown }): Promise<Reply<T>>;
  /** Another conductor on the same peers, with its own database and environment (another model, other caps). */
  conductorWith(env: Record<string, string>): Promise<StartedConductor>;
  stop(): Promise<void>;
}

export interface StartedConductor {
  url: string;
  databaseUrl: string;
  instance: ConductorInstance;
  server: RunningServer;
  send<T = any>(user: User, body: Record<string, unknown>): Promise<Reply<T>>;
  stop(): Promise<void>;
}

/** The conductor's peers' URLs, and the X-Service-Key the simulation service accepts. */
interface Peers {
  gateway: string;
  graph: string;
  generation: string;
  simulation: string;
  simulationKey: string;
}

/** A conductor on a fresh database, pointed at `peers`; `env` adds to (or overrides) the test settings. */
async function startConductor(peers: Peers, env: Record<string, string>): Promise<StartedConductor> {
  const database = await createDatabase('conductor');
  const config = loadConfig(ConductorConfigSchema, {
    PORT: '0',
    DATABASE_URL: database,
    REDIS_URL: process.env.REDIS_URL,
    REDIS_KEY_PREFIX: `test-${randomBytes(4).toString('hex')}`,
    SERVICE_KEY: CONDUCTOR_KEY,
    LOG_LEVEL: 'silent',
    GATEWAY_URL: peers.gateway,
    GATEWAY_SERVICE_KEY: GATEWAY_KEY,
    GRAPH_URL: peers.graph,
    GRAPH_SERVICE_KEY: GRAPH_KEY,
    GENERATION_URL: peers.generation,
    GENERATION_SERVICE_KEY: GENERATION_KEY,
    SIMULATION_URL: peers.simulation,
    SIMULATION_SERVICE_KEY: peers.simulationKey,
    CONDUCTOR_RATE_LIMIT_FREE: '100000',
    INTROSPECTION_CACHE_MS: '0',
    PROVIDER_RETRIES: '0',
    PROVIDER_TIMEOUT_MS: '5000',
    PEER_TIMEOUT_MS: '5000',
    ...env,
  });
  const instance = await createConductorService(config, createLogger('conductor', 'silent'));
  const server = await serve(instance.app, {
    port: config.PORT,
    host: '127.0.0.1',
    logger: instance.logger,
    graceMs: 500,
    onDrain: instance.drain,
    onClose: [instance.close],
    metrics: { port: 0, metrics: instance.metrics },
  });
  return {
    url: server.url,
    databaseUrl: database,
    instance,
    server,
    send: (user, body) => request(server.url, '/api/v1/conductor/messages', { method: 'POST', headers: user.headers, body }),
    async stop() {
      await server.close();
      await dropDatabase(database);
    },
  };
}

export interface PlatformOptions {
  /** The conductor's environment (models, caps). */
  conductor?: Record<string, string>;
  /** SIMULATION_URL for the conductor and gateway; unset: a peer that is down (503 to everything). */
  simulationUrl?: string;
  /** The X-Service-Key the simulation service accepts (a stand-in accepts any). */
  simulationKey?: string;
}

/** The gateway (signing tokens, the ledger, the proxy) on its own database, answering on `bound`, in front of `peers` and the conductor. */
async function startGateway(bound: BoundServer, peers: Peers, conductorUrl: string): Promise<Platform['gateway']> {
  const database = await createDatabase('gateway');
  const dataDir = mkdtempSync(join(tmpdir(), 'conductor-test-'));
  const config = loadConfig(GatewayConfigSchema, {
    DATABASE_URL: database,
    REDIS_URL: process.env.REDIS_URL,
    REDIS_KEY_PREFIX: `test-${randomBytes(4).toString('hex')}`,
    TEMPORA_DATA_DIR: dataDir,
    SERVICE_KEY: GATEWAY_KEY,
    ADMIN_KEY,
    LOG_LEVEL: 'silent',
    GENERATION_URL: peers.generation,
    GENERATION_SERVICE_KEY: GENERATION_KEY,
    GRAPH_URL: peers.graph,
    GRAPH_SERVICE_KEY: GRAPH_KEY,
    SIMULATION_URL: peers.simulation,
    SIMULATION_SERVICE_KEY: peers.simulationKey,
    CONDUCTOR_URL: conductorUrl,
    CONDUCTOR_SERVICE_KEY: CONDUCTOR_KEY,
    // The gateway follows simulation runs, the conductor's included, and settles their charges.
    CHARGED_JOB_CHECK_MS: '50',
    RATE_LIMIT_MULTIPLIER: '1000',
    UPSTREAM_TIMEOUT_MS: '30000',
  });
  const instance = await createGatewayService(config, createLogger('gateway', 'silent'));
  const callback = instance.app.callback();
  // The gateway's express lane first, as the kit's serve() runs it.
  bound.answer((request, response) => void (instance.express(request, response) || callback(request, response)));
  return {
    url: bound.url,
    async close() {
      instance.drain();
      await bound.close();
      await instance.close();
      await dropDatabase(database);
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/**
 * The platform in this process, on real PostgreSQL and Redis: the graph (seeded with the Napoleonic years),
 * the generation service (offline models), the gateway (signing tokens, the ledger, the proxy) and the
 * conductor between them, each on its own database and a port bound at once (listen(0)).
 */
export async function startPlatform(options: PlatformOptions = {}): Promise<Platform> {
  const [graph, generation] = await Promise.all([startGraph(), startGeneration()]);
  const ingested = await graph.post('/ingest/tdf', napoleonicRecords(), writer);
  if (ingested.status !== 200) throw new Error(`graph ingest: ${ingested.status} ${JSON.stringify(ingested.body)}`);
  const downSimulation = options.simulationUrl === undefined ? await boundAtOnce() : undefined;
  const simulationUrl = options.simulationUrl ?? downSimulation!.url;
  const gatewayServer = await boundAtOnce();
  const peers = {
    gateway: gatewayServer.url,
    graph: graph.url,
    generation: generation.url,
    simulation: simulationUrl,
    simulationKey: options.simulationKey ?? CONDUCTOR_KEY,
  };
  const main = await startConductor(peers, options.conductor ?? {});

  const gateway = await startGateway(gatewayServer, peers, main.url);
  const extras: StartedConductor[] = [];
  const { server } = main;

  const base = { conductor: server.url, gateway: gateway.url };
  const call = <T = any>(target: 'conductor' | 'gateway', method: string, path: string, init: { headers?: Record<string, string>; body?: unknown } = {}) =>
    request<T>(base[target], path, { method, ...init });
  const admin = { 'X-Admin-Key': ADMIN_KEY };
  return {
    gateway,
    graph,
    generation,
    conductor: main,
    async user(credits) {
      const issued = await call('gateway', 'POST', '/api/v1/auth/dev/token', {
        headers: admin,
        body: { external_id: `conductor-${randomBytes(6).toString('hex')}` },
      });
      if (issued.status >= 300) throw new Error(`dev token: ${issued.status} ${JSON.stringify(issued.body)}`);
      const id = issued.body.user.id as string;
      const signup = Number(issued.body.user.balance);
      const adjust = credits - signup;
      if (adjust > 0) {
        const granted = await call('gateway', 'POST', '/api/v1/credits/admin/grant', {
          headers: admin,
          body: { user_id: id, amount: adjust, reason: 'test', idempotency_key: randomBytes(8).toString('hex') },
        });
        if (granted.status !== 201) throw new Error(`grant: ${granted.status}`);
      } else if (adjust < 0) {
        const charged = await call('gateway', 'POST', '/api/v1/credits/charge', {
          headers: { 'X-Service-Key': GATEWAY_KEY },
          body: { user_id: id, amount: -adjust, operation: 'test.setup', idempotency_key: randomBytes(8).toString('hex') },
        });
        if (charged.status !== 201) throw new Error(`charge: ${charged.status}`);
      }
      const token = issued.body.access_token as string;
      return { id, token, headers: { Authorization: `Bearer ${token}` } };
    },
    async balance(user) {
      return (await call('gateway', 'GET', '/api/v1/credits/balance', { headers: user.headers })).body.balance as number;
    },
    async history(user) {
      return (await call('gateway', 'GET', '/api/v1/credits/history?limit=100', { headers: user.headers })).body.items;
    },
    send: (user, body) => call('conductor', 'POST', '/api/v1/conductor/messages', { headers: user.headers, body }),
    call,
    async conductorWith(env) {
      const extra = await startConductor(peers, env);
      extras.push(extra);
      return extra;
    },
    async stop() {
      for (const extra of extras) await extra.stop();
      await main.stop();
      await gateway.close();
      await downSimulation?.close();
      await Promise.all([graph.stop(), generation.stop()]);
    },
  };
}

/** The ledger entries a request's tool calls booked (charges and their refunds), by the message's id. */
export function conductorEntries(history: Awaited<ReturnType<Platform['history']>>, messageId: string) {
  return history.filter((entry) => entry.idempotency_key.includes(`conductor:${messageId}:`));
}

/** An MCP client of the conductor's `/mcp`, sending `headers` (the user's credentials) with each request. */
export async function mcpClient(url: string, headers: Record<string, string>): Promise<Client> {
  const client = new Client({ name: 'conductor-test', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${url}/mcp`), { requestInit: { headers } }));
  return client;
}

export type ToolReply = { structuredContent: Record<string, any>; isError?: boolean; content: Array<{ type: string; text: string }> };
