import { z } from 'zod';
import { GraphConfigSchema } from '../config.ts';

export const WORKER_ROLES = ['renderer', 'expander', 'judge', 'daily'] as const;
export type WorkerRole = (typeof WORKER_ROLES)[number];

const optional = z
  .string()
  .optional()
  .transform((value) => (value && value.trim() !== '' ? value.trim() : undefined));
const ms = (fallback: number) => z.coerce.number().int().min(1).default(fallback);
const count = (fallback: number, max: number) => z.coerce.number().int().min(1).max(max).default(fallback);

/** The graph worker's environment: the graph's own, plus what the operator's GraphWorker ConfigMap sets. */
export const WorkerConfigSchema = GraphConfigSchema.extend({
  /** The role is the command's argument; when the ConfigMap's WORKER_ROLE is set too, they must agree. */
  WORKER_ROLE: z.enum(WORKER_ROLES).optional(),
  /** Render jobs (renderer) or moments (judge, expander) handled at once by one process. */
  WORKER_CONCURRENCY: count(2, 64),
  /** What this role may spend per UTC day, shared by its replicas; 0 allows free (offline) calls only. */
  WORKER_DAILY_BUDGET_USD: z.coerce.number().min(0).default(5),
  /** Sleep between polls when there is nothing to do. */
  WORKER_POLL_MS: ms(2_000),
  /** X-Service-Key presented to the generation service; unset: the first SERVICE_KEY. */
  GENERATION_SERVICE_KEY: optional,
  /** One synchronous render; the generation service gives up at its GENERATION_TIMEOUT_MS (300 s). */
  RENDER_TIMEOUT_MS: ms(330_000),
  RENDER_MAX_ATTEMPTS: count(5, 50),
  /** First retry delay; doubles with each failed attempt. */
  RENDER_BACKOFF_MS: ms(30_000),
  /** A job running this long lost its worker and is reclaimed; must exceed RENDER_TIMEOUT_MS. */
  RENDER_STALE_MS: ms(900_000),
  /** Moments the expander looks at per run, and the moments it may add for each. */
  EXPANDER_BATCH: count(5, 100),
  EXPANDER_MAX_NEW: count(3, 10),
  /** A moment with fewer curated (not automatic) edges than this is under-connected. */
  EXPANDER_MIN_EDGES: count(2, 100),
  DAILY_MOMENTS: count(5, 20),
  /** Text model of the judge, expander and daily: native when GEMINI_API_KEY is set, else the aggregator, else offline. */
  GEMINI_API_KEY: optional,
  GEMINI_BASE_URL: z.url().default('https://generativelanguage.googleapis.com'),
  OPENROUTER_API_KEY: optional,
  OPENROUTER_BASE_URL: optional.pipe(z.url().optional()),
  WORKER_TEXT_MODEL: optional,
  PROVIDER_TIMEOUT_MS: ms(60_000),
  PROVIDER_RETRIES: z.coerce.number().int().min(0).max(10).default(3),
}).refine((config) => config.RENDER_STALE_MS > config.RENDER_TIMEOUT_MS, { path: ['RENDER_STALE_MS'], message: 'must exceed RENDER_TIMEOUT_MS, or running renders would be reclaimed' });
export type WorkerConfig = z.output<typeof WorkerConfigSchema>;
