import { runService } from '@tempora/kit/runtime';
import { VERSION } from './version.ts';

await runService('billing', VERSION, async () => {
  const [{ BillingConfigSchema }, { createBillingService }] = await Promise.all([import('./config.ts'), import('./service.ts')]);
  return { configSchema: BillingConfigSchema, create: (config) => createBillingService(config) };
});
