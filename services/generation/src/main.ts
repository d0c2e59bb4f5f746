import { runService } from '@tempora/kit/runtime';
import { VERSION } from './version.ts';

await runService('generation', VERSION, async () => {
  const [{ GenerationServiceConfigSchema }, { createGenerationService }] = await Promise.all([import('./config.ts'), import('./service.ts')]);
  return {
    configSchema: GenerationServiceConfigSchema,
    create: async (config) => {
      const service = await createGenerationService(config);
      service.logger.info({ providers: service.providers.configured, agent_pool: service.runner.mode }, 'generation models');
      return service;
    },
  };
});
