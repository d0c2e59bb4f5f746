import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type RunningServer, serve } from '@tempora/kit/http';
import { createLogger } from '@tempora/kit/observability';
import { loadConfig } from '@tempora/kit/runtime';
import { createDatabase, dropDatabase } from '../../../test/support/database.ts';
import { type Reply, request } from '../../../test/support/http.ts';
import { SimulationConfigSchema } from '../src/config.ts';
import { createSimulationService, type SimulationInstance } from '../src/service.ts';

export const SERVICE_KEY = 'sim-service-key-0123456789';
export const API_KEY = 'sim-api-key-0123456789abcdef';
export const service = { 'X-Service-Key': SERVICE_KEY };
/**
 * A user's id as the gateway names users (a UUID): a test's user name stands for a stable UUID of its own,
 * and a UUID stands for itself.
 */
export function userId(name: string): string {
  if (/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(name)) return name;
  const hex = createHash('sha256').update(name).digest('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-4${hex.slice(13, 16)}-8${hex.slice(17, 20)}-${hex.slice(20, 32)}`;
}
/** A user as the gateway names them: X-User-ID beside its service key. */
export const asUser = (user: string) => ({ 'X-Service-Key': SERVICE_KEY, 'X-User-ID': userId(user) });
export const apiKey = { 'X-API-Key': API_KEY };

export interface SimulationHarness {
  url: string;
  instance: SimulationInstance;
  server: RunningServer;
  databaseUrl: string;
  dataDir: string;
  call<T = any>(method: string, path: string, init?: { headers?: Record<string, string>; body?: unknown; raw?: string }): Promise<Reply<T>>;
  /** Starts a run as `user` and waits for it to end (up to `wait` seconds); the reply of POST /simulate. */
  run<T = any>(body: unknown, user?: string, wait?: number): Promise<Reply<T>>;
  result<T = any>(id: string, user?: string): Promise<T>;
  stop(options?: { keepDatabase?: boolean }): Promise<void>;
}

/** A simulation service in this process on a fresh database (or `databaseUrl`), a fresh Redis namespace and a free port. */
export async function startSimulation(env: Record<string, string> = {}, databaseUrl?: string): Promise<SimulationHarness> {
  const database = databaseUrl ?? (await createDatabase('simulation'));
  const dataDir = mkdtempSync(join(tmpdir(), 'simulation-test-'));
  const config = loadConfig(SimulationConfigSchema, {
    DATABASE_URL: database,
    REDIS_URL: process.env.REDIS_URL,
    REDIS_KEY_PREFIX: `test-${randomBytes(4).toString('hex')}`,
    TEMPORA_DATA_DIR: dataDir,
    SERVICE_KEY,
    SIMULATION_API_KEYS: `tester:${API_KEY}`,
    LOG_LEVEL: 'silent',
    RATE_LIMIT_READ_PER_MINUTE: '100000',
    RATE_LIMIT_WRITE_PER_MINUTE: '100000',
    RUN_CLAIM_INTERVAL_MS: '200',
    STREAM_POLL_MS: '200',
    SHUTDOWN_GRACE_MS: '2000',
    ...env,
  });
  const instance = await createSimulationService(config, createLogger('simulation', config.LOG_LEVEL));
  const server = await serve(instance.app, {
    port: 0,
    host: '127.0.0.1',
    logger: instance.logger,
    graceMs: 500,
    onDrain: instance.drain,
    onClose: [instance.close],
    metrics: { port: 0, metrics: instance.metrics },
  });
  const call = <T = any>(method: string, path: string, init: { headers?: Record<string, string>; body?: unknown; raw?: string } = {}) =>
    request<T>(server.url, path, { method, ...init });
  return {
    url: server.url,
    instance,
    server,
    databaseUrl: database,
    dataDir,
    call,
    run: (body, user = 'user-1', wait = 60) => call('POST', `/api/v1/simulate?wait=${wait}`, { headers: asUser(user), body }),
    async result(id, user = 'user-1') {
      const reply = await call('GET', `/api/v1/simulations/${id}/result`, { headers: asUser(user) });
      if (reply.status !== 200) throw new Error(`result of ${id}: ${reply.status} ${JSON.stringify(reply.body)}`);
      return reply.body.result;
    },
    async stop(options = {}) {
      await server.close();
      if (!databaseUrl && !options.keepDatabase) await dropDatabase(database);
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** Polls `probe` until it answers something truthy. */
export async function until<T>(what: string, probe: () => Promise<T | undefined | false>, timeoutMs = 20_000): Promise<T> {
  const started = Date.now();
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() - started > timeoutMs) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
