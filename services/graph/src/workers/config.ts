import { workerPortField } from '@tempora/kit/http';
import { z } from 'zod';
import { checkRendererConfig, GraphConfigFields, WORKER_ROLES } from '../config.ts';

export { WORKER_ROLES, type WorkerRole } from '../config.ts';

/**
 * The graph worker's environment: the graph's own (with the renderer's variables, WORKER_CONCURRENCY,
 * WORKER_DAILY_BUDGET_USD, WORKER_POLL_MS and RENDER_*, and the other roles' EXPANDER_*, DAILY_MOMENTS and
 * text model, all shared with the graph service's in-process workers), plus what the operator's GraphWorker
 * ConfigMap sets. GRAPH_WORKERS is the API process's switch and means nothing here.
 */
export const WorkerConfigSchema = GraphConfigFields.omit({ GRAPH_WORKERS: true })
  .extend({
    /** The role is the command's argument; when the ConfigMap's WORKER_ROLE is set too, they must agree. */
    WORKER_ROLE: z.enum(WORKER_ROLES).optional(),
    /** Where renderer, expander and judge serve /health and /metrics; unset serves nothing, and daily never does. */
    ...workerPortField,
  })
  .superRefine(checkRendererConfig);
export type WorkerConfig = z.output<typeof WorkerConfigSchema>;
