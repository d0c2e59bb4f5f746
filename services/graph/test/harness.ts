import { randomBytes } from 'node:crypto';
import { type RunningServer, serve } from '@tempora/kit/http';
import { createLogger } from '@tempora/kit/observability';
import { loadConfig } from '@tempora/kit/runtime';
import { createDatabase, dropDatabase } from '../../../test/support/database.ts';
import { request } from '../../../test/support/http.ts';
import { GraphConfigSchema } from '../src/config.ts';
import { createGraphService, type GraphInstance } from '../src/service.ts';

export const SERVICE_KEY = 'svc-test-key-0123456789';
export const WRITER_TOKEN = 'writer-token-0123456789';
export const ADMIN_KEY = 'admin-test-key-0123456789';
export const serviceKey = { 'X-Service-Key': SERVICE_KEY };
export const writer = { Authorization: `Bearer ${WRITER_TOKEN}` };

export interface GraphHarness {
  url: string;
  instance: GraphInstance;
  server: RunningServer;
  databaseUrl: string;
  get<T = any>(path: string, headers?: Record<string, string>): ReturnType<typeof request<T>>;
  post<T = any>(path: string, body: unknown, headers?: Record<string, string>): ReturnType<typeof request<T>>;
  stop(): Promise<void>;
}

/**
 * A graph service in this process on a fresh database, a fresh Redis namespace and a free port. With
 * `env.DATABASE_URL: ''` it runs on the embedded database under `env.TEMPORA_DATA_DIR` instead (`databaseUrl`
 * is then empty; the caller removes the directory).
 */
export async function startGraph(env: Record<string, string> = {}, databaseUrl?: string): Promise<GraphHarness> {
  const embedded = env.DATABASE_URL === '';
  const database = embedded ? '' : (databaseUrl ?? (await createDatabase('graph')));
  const config = loadConfig(GraphConfigSchema, {
    DATABASE_URL: database,
    REDIS_URL: process.env.REDIS_URL,
    REDIS_KEY_PREFIX: `test-${randomBytes(4).toString('hex')}`,
    SERVICE_KEY: SERVICE_KEY,
    ADMIN_KEY: ADMIN_KEY,
    WRITER_TOKENS: `tester:${WRITER_TOKEN}`,
    GRAPH_SEED: 'false',
    RATE_LIMIT_PUBLIC_PER_MINUTE: '100000',
    RATE_LIMIT_READ_PER_MINUTE: '100000',
    RATE_LIMIT_WRITE_PER_MINUTE: '100000',
    LOG_LEVEL: 'silent',
    ...env,
  });
  const instance = await createGraphService(config, createLogger('graph', config.LOG_LEVEL));
  await instance.graph.ready();
  const server = await serve(instance.app, {
    port: 0,
    host: '127.0.0.1',
    logger: instance.logger,
    graceMs: 1000,
    onDrain: instance.drain,
    onClose: [instance.close],
    metrics: { port: 0, metrics: instance.metrics },
  });
  return {
    url: server.url,
    instance,
    server,
    databaseUrl: database,
    get: (path, headers) => request(server.url, path, { headers }),
    post: (path, body, headers) => request(server.url, path, { method: 'POST', body, headers }),
    async stop() {
      await server.close();
      if (!databaseUrl && !embedded) await dropDatabase(database);
    },
  };
}
