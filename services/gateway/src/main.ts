import { runService } from '@tempora/kit/runtime';
import { VERSION } from './version.ts';

// runService starts tracing before the gateway's modules (http, koa, pg, redis) load.
await runService('gateway', VERSION, async () => {
  const [{ GatewayConfigSchema }, { createGatewayService }] = await Promise.all([import('./config.ts'), import('./service.ts')]);
  return { configSchema: GatewayConfigSchema, create: (config) => createGatewayService(config) };
});
