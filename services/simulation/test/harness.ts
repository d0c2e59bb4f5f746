import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createDatabase, dropDatabase } from '../../../test/support/database.ts';
import { type StartedService, startService } from '../../../test/support/harness.ts';
import type { Reply } from '../../../test/support/http.ts';
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

export interface SimulationHarness extends StartedService<SimulationInstance> {
  dataDir: string;
  /** Starts a run as `user` and waits for it to end (up to `wait` seconds); the reply of POST /simulate. */
  run<T = any>(body: unknown, user?: string, wait?: number): Promise<Reply<T>>;
  result<T = any>(id: string, user?: string): Promise<T>;
  stop(options?: { keepDatabase?: boolean }): Promise<void>;
}

/** A simulation service in this process on a fresh database (or `databaseUrl`), a fresh Redis namespace and a free port. */
export async function startSimulation(env: Record<string, string> = {}, databaseUrl?: string): Promise<SimulationHarness> {
  // The database outlives the service when the test keeps it (a restart on the same runs).
  const database = databaseUrl ?? (await createDatabase('simulation'));
  const dataDir = mkdtempSync(join(tmpdir(), 'simulation-test-'));
  const started = await startService({
    name: 'simulation',
    schema: SimulationConfigSchema,
    create: createSimulationService,
    graceMs: 500,
    env: {
      DATABASE_URL: database,
      TEMPORA_DATA_DIR: dataDir,
      SERVICE_KEY,
      SIMULATION_API_KEYS: `tester:${API_KEY}`,
      RATE_LIMIT_READ_PER_MINUTE: '100000',
      RATE_LIMIT_WRITE_PER_MINUTE: '100000',
      RUN_CLAIM_INTERVAL_MS: '200',
      STREAM_POLL_MS: '200',
      SHUTDOWN_GRACE_MS: '2000',
      ...env,
    },
  }).catch(async (error) => {
    if (!databaseUrl) await dropDatabase(database);
    throw error;
  });
  return {
    ...started,
    dataDir,
    run: (body, user = 'user-1', wait = 60) => started.call('POST', `/api/v1/simulate?wait=${wait}`, { headers: asUser(user), body }),
    async result(id, user = 'user-1') {
      const reply = await started.call('GET', `/api/v1/simulations/${id}/result`, { headers: asUser(user) });
      if (reply.status !== 200) throw new Error(`result of ${id}: ${reply.status} ${JSON.stringify(reply.body)}`);
      return reply.body.result;
    },
    async stop(options = {}) {
      await started.stop();
      if (!databaseUrl && !options.keepDatabase) await dropDatabase(database);
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
