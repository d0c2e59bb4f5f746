import { runService } from '@tempora/kit/runtime';
import { VERSION } from './version.ts';

await runService('conductor', VERSION, async () => {
  const [{ ConductorConfigSchema }, { createConductorService }] = await Promise.all([import('./config.ts'), import('./service.ts')]);
  return { configSchema: ConductorConfigSchema, create: (config) => createConductorService(config) };
});
