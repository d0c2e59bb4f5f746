import { z } from 'zod';
import { providerConfigFields } from '@tempora/kit/providers';
import { workerPortField } from '@tempora/kit/http';
import { GraphConfigFields, checkRendererConfig, envCount as count, envOptional as optional } from '../config.ts';

export const WORKER_ROLES = ['renderer', 'expander', 'judge', 'daily'] as const;
export type WorkerRole = (typeof WORKER_ROLES)[number];

/**
 * The graph worker's environment: the graph's own (with the renderer's variables, WORKER_CONCURRENCY,
 * WORKER_DAILY_BUDGET_USD, WORKER_POLL_MS and RENDER_*, shared with the in-process renderer), plus what the
 * operator's GraphWorker ConfigMap sets. GRAPH_RENDERER is the API process's switch and means nothing here.
 */
export const WorkerConfigSchema = GraphConfigFields.omit({ GRAPH_RENDERER: true })
  .extend({
    /** The role is the command's argument; when the ConfigMap's WORKER_ROLE is set too, they must agree. */
    WORKER_ROLE: z.enum(WORKER_ROLES).optional(),
    /** Where renderer, expander and judge serve /health and /metrics; unset serves nothing, and daily never does. */
    ...workerPortField,
    /** Moments the expander looks at per run, and the moments it may add for each. */
    EXPANDER_BATCH: count(5, 100),
    EXPANDER_MAX_NEW: count(3, 10),
    /** A moment with fewer curated (not automatic) edges than this is under-connected. */
    EXPANDER_MIN_EDGES: count(2, 100),
    DAILY_MOMENTS: count(5, 20),
    /** Text model of the judge, expander and daily: native when GEMINI_API_KEY is set, else the aggregator, else offline. */
    ...providerConfigFields,
    WORKER_TEXT_MODEL: optional,
  })
  .superRefine(checkRendererConfig);
export type WorkerConfig = z.output<typeof WorkerConfigSchema>;
