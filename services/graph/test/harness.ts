import { type StartedService, startService } from '../../../test/support/harness.ts';
import { GraphConfigSchema } from '../src/config.ts';
import { createGraphService, type GraphInstance } from '../src/service.ts';

export const SERVICE_KEY = 'svc-test-key-0123456789';
export const WRITER_TOKEN = 'writer-token-0123456789';
export const ADMIN_KEY = 'admin-test-key-0123456789';
export const serviceKey = { 'X-Service-Key': SERVICE_KEY };
export const writer = { Authorization: `Bearer ${WRITER_TOKEN}` };

export type GraphHarness = StartedService<GraphInstance>;

/**
 * A graph service in this process on a fresh database (or `databaseUrl`, which its stop leaves in place), a
 * fresh Redis namespace and a free port. With `env.DATABASE_URL: ''` it runs on the embedded database under
 * `env.TEMPORA_DATA_DIR` instead (`databaseUrl` is then empty; the caller removes the directory).
 */
export function startGraph(env: Record<string, string> = {}, databaseUrl?: string): Promise<GraphHarness> {
  return startService({
    name: 'graph',
    schema: GraphConfigSchema,
    async create(config, logger) {
      const instance = await createGraphService(config, logger);
      await instance.graph.ready();
      return instance;
    },
    graceMs: 1000,
    env: {
      SERVICE_KEY: SERVICE_KEY,
      ADMIN_KEY: ADMIN_KEY,
      WRITER_TOKENS: `tester:${WRITER_TOKEN}`,
      GRAPH_SEED: 'false',
      RATE_LIMIT_PUBLIC_PER_MINUTE: '100000',
      RATE_LIMIT_READ_PER_MINUTE: '100000',
      RATE_LIMIT_WRITE_PER_MINUTE: '100000',
      ...(databaseUrl === undefined ? {} : { DATABASE_URL: databaseUrl }),
      ...env,
    },
  });
}
