import { runService } from '@tempora/kit/runtime';
import { VERSION } from './version.ts';

await runService('simulation', VERSION, async () => {
  const [{ SimulationConfigSchema }, { createSimulationService }] = await Promise.all([import('./config.ts'), import('./service.ts')]);
  return { configSchema: SimulationConfigSchema, create: (config) => createSimulationService(config) };
});
