import { runService } from '@tempora/kit/runtime';
import { VERSION } from './version.ts';

await runService('graph', VERSION, async () => {
  const [{ GraphConfigSchema }, { createGraphService }] = await Promise.all([import('./config.ts'), import('./service.ts')]);
  return { configSchema: GraphConfigSchema, create: (config) => createGraphService(config) };
});
