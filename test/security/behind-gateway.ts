/**
 * The three services that trust the gateway (conductor, simulation, generation) in this process, pointed at
 * a gateway of the test's choosing (a stand-in whose introspection fails, say), on a database of their own
 * and a Redis namespace of their own, with the security platform's service key.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type Koa from 'koa';
import { ConductorConfigSchema } from '../../services/conductor/src/config.ts';
import { createConductorService } from '../../services/conductor/src/service.ts';
import { GenerationServiceConfigSchema } from '../../services/generation/src/config.ts';
import { createGenerationService } from '../../services/generation/src/service.ts';
import { type RunningServer, serve } from '../../services/kit/src/http/index.ts';
import { createLogger, type Logger } from '../../services/kit/src/observability/index.ts';
import { loadConfig } from '../../services/kit/src/runtime/index.ts';
import { SimulationConfigSchema } from '../../services/simulation/src/config.ts';
import { createSimulationService } from '../../services/simulation/src/service.ts';
import { createDatabase, dropDatabase } from '../support/database.ts';
import { SECRETS } from './platform.ts';

export interface ServicesBehind {
  urls: { conductor: string; simulation: string; generation: string };
  stop(): Promise<void>;
}

export async function servicesBehind(gatewayUrl: string): Promise<ServicesBehind> {
  const database = await createDatabase('callers');
  const dataDir = mkdtempSync(join(tmpdir(), 'tempora-callers-'));
  const env = {
    DATABASE_URL: database,
    REDIS_URL: process.env.REDIS_URL,
    REDIS_KEY_PREFIX: `callers-${randomBytes(4).toString('hex')}`,
    TEMPORA_DATA_DIR: dataDir,
    SERVICE_KEY: SECRETS.serviceKey,
    GATEWAY_URL: gatewayUrl,
    INTROSPECTION_CACHE_MS: '0',
    LOG_LEVEL: 'silent',
  };
  const servers: RunningServer[] = [];
  const start = async (instance: { app: Koa; logger: Logger; drain(): void; close(): Promise<void> }) => {
    const server = await serve(instance.app, {
      port: 0,
      host: '127.0.0.1',
      logger: instance.logger,
      graceMs: 200,
      onDrain: instance.drain,
      onClose: [instance.close],
    });
    servers.push(server);
    return server.url;
  };
  const stop = async () => {
    for (const server of servers) await server.close();
    await dropDatabase(database);
    rmSync(dataDir, { recursive: true, force: true });
  };
  try {
    const conductor = await start(await createConductorService(loadConfig(ConductorConfigSchema, env), createLogger('conductor', 'silent')));
    const simulation = await start(await createSimulationService(loadConfig(SimulationConfigSchema, env), createLogger('simulation', 'silent')));
    const generation = await start(
      await createGenerationService(
        loadConfig(GenerationServiceConfigSchema, { ...env, GRAPH_LOOKUP: 'false', FREE_IMAGE_ENABLED: 'false' }),
        createLogger('generation', 'silent'),
      ),
    );
    return { urls: { conductor, simulation, generation }, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}
