import { runWorker } from '@tempora/kit/runtime';
import { VERSION } from './version.ts';

/**
 * An agent pool worker (`npm run worker -w services/generation`; the pods of an AgentPool): consumes agent
 * tasks from the Redis stream through the consumer group and runs them with this process's providers.
 * Optional WORKER_PORT serves /health and /metrics (the kit's worker endpoints).
 */
await runWorker('generation-worker', VERSION, async () => {
  const { PoolWorkerConfigSchema, startPoolWorker } = await import('./pool/process.ts');
  return { configSchema: PoolWorkerConfigSchema, start: startPoolWorker };
});
