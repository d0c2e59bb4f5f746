import { parseWriterTokens } from '@tempora/kit/http';
import { defaultMcpAllowedHosts, mcpAllowedHostsField } from '@tempora/kit/mcp';
import { providerConfigFields } from '@tempora/kit/providers';
import { baseConfigSchema, csv } from '@tempora/kit/runtime';
import { z } from 'zod';

const perMinute = (fallback: number) => z.coerce.number().int().min(1).default(fallback);
/** Milliseconds, at least 1. */
const envMs = (fallback: number) => z.coerce.number().int().min(1).default(fallback);
/** A count from 1 to `max`. */
export const envCount = (fallback: number, max: number) => z.coerce.number().int().min(1).max(max).default(fallback);
/** A string; blank is unset. */
export const envOptional = z
  .string()
  .optional()
  .transform((value) => (value && value.trim() !== '' ? value.trim() : undefined));

/** The graph's background workers (docs/graph.md, "Background workers"). */
export const WORKER_ROLES = ['renderer', 'expander', 'judge', 'daily'] as const;
export type WorkerRole = (typeof WORKER_ROLES)[number];

/**
 * What a renderer needs, wherever it runs: the renderer worker process and the graph service's in-process
 * renderer read the same variables (docs/graph.md, "Background workers"). GENERATION_URL is the base
 * config's peer URL.
 */
export const rendererConfigFields = {
  /** Render jobs (renderer) or moments (judge, expander) handled at once by one process. */
  WORKER_CONCURRENCY: envCount(2, 64),
  /** What this role may spend per UTC day, shared by its replicas; 0 allows free (offline) calls only. */
  WORKER_DAILY_BUDGET_USD: z.coerce.number().min(0).default(5),
  /** Sleep between polls when there is nothing to do. */
  WORKER_POLL_MS: envMs(2_000),
  /** X-Service-Key presented to the generation service; unset: the first SERVICE_KEY. */
  GENERATION_SERVICE_KEY: envOptional,
  /** One synchronous render; the generation service gives up at its GENERATION_TIMEOUT_MS (300 s). */
  RENDER_TIMEOUT_MS: envMs(330_000),
  RENDER_MAX_ATTEMPTS: envCount(5, 50),
  /** First retry delay; doubles with each failed attempt. */
  RENDER_BACKOFF_MS: envMs(30_000),
  /** A job running this long lost its worker and is reclaimed; must exceed RENDER_TIMEOUT_MS. */
  RENDER_STALE_MS: envMs(900_000),
};

/**
 * What the expander, judge and daily need, wherever they run: the worker process and the graph service's
 * in-process workers (GRAPH_WORKERS) read the same variables.
 */
export const roleConfigFields = {
  /** Moments the expander looks at per run, and the moments it may add for each. */
  EXPANDER_BATCH: envCount(5, 100),
  EXPANDER_MAX_NEW: envCount(3, 10),
  /** A moment with fewer curated (not automatic) edges than this is under-connected. */
  EXPANDER_MIN_EDGES: envCount(2, 100),
  DAILY_MOMENTS: envCount(5, 20),
  /** Text model of the judge, expander and daily: native when GEMINI_API_KEY is set, else the aggregator, else offline. */
  ...providerConfigFields,
  WORKER_TEXT_MODEL: envOptional,
};

/** The cross-field rule of the renderer's variables, for every schema that holds them. */
export function checkRendererConfig(config: { RENDER_STALE_MS: number; RENDER_TIMEOUT_MS: number }, ctx: z.RefinementCtx): void {
  if (config.RENDER_STALE_MS <= config.RENDER_TIMEOUT_MS) {
    ctx.addIssue({ code: 'custom', path: ['RENDER_STALE_MS'], message: 'must exceed RENDER_TIMEOUT_MS, or running renders would be reclaimed' });
  }
}

const WRITER_NAME = /^[A-Za-z0-9._@|+-]{1,100}$/;

/** The graph service's variables as a plain object schema, for the worker's schema to extend. */
export const GraphConfigFields = baseConfigSchema('graph').extend({
  WRITER_TOKENS: csv.transform((entries, ctx) => {
    let writers;
    try {
      writers = parseWriterTokens(entries);
    } catch (error) {
      ctx.addIssue({ code: 'custom', message: (error as Error).message });
      return z.NEVER;
    }
    // `writer:<name>` owns the scenes rendered for the writer's private moments, named to the generation
    // service in X-User-ID, which takes these characters only.
    const misnamed = writers.find((writer) => !WRITER_NAME.test(writer.name));
    if (misnamed) {
      ctx.addIssue({ code: 'custom', message: `writer name "${misnamed.name}" must be 1 to 100 letters, digits or ._@|+-` });
      return z.NEVER;
    }
    return writers;
  }),
  /** Automatic links per type per moment (contemporaneous, same_location, thematic). */
  AUTOLINK_MAX_PER_TYPE: z.coerce.number().int().min(0).max(100).default(8),
  RATE_LIMIT_PUBLIC_PER_MINUTE: perMinute(60),
  RATE_LIMIT_READ_PER_MINUTE: perMinute(300),
  RATE_LIMIT_WRITE_PER_MINUTE: perMinute(30),
  GRAPH_SEED: z
    .enum(['true', 'false'])
    .default('true')
    .transform((value) => value === 'true'),
  /** Share of the index living in its overlay at which it is rebuilt from PostgreSQL. */
  INDEX_REBUILD_RATIO: z.coerce.number().min(0.01).max(10).default(0.25),
  BODY_LIMIT: z
    .string()
    .regex(/^\d+(b|kb|mb)$/i)
    .default('8mb'),
  /**
   * The background workers this process runs itself: comma-separated roles, or `none`. Unset: every role
   * on the embedded database (no DATABASE_URL; it serves one process, so no worker process can), none with
   * PostgreSQL (the GraphWorker pods run them).
   */
  GRAPH_WORKERS: z
    .string()
    .optional()
    .transform((value, ctx) => {
      if (value === undefined || value.trim() === '') return undefined;
      const roles = value.trim() === 'none' ? [] : value.split(',').map((role) => role.trim());
      const unknown = roles.filter((role) => !(WORKER_ROLES as readonly string[]).includes(role));
      if (unknown.length > 0)
        ctx.addIssue({ code: 'custom', message: `unknown roles ${unknown.join(', ')}: list some of ${WORKER_ROLES.join(', ')}, or none` });
      return [...new Set(roles)] as WorkerRole[];
    }),
  ...rendererConfigFields,
  ...roleConfigFields,
});

export const GraphConfigSchema = GraphConfigFields.extend({
  /** Host and Origin names the MCP server answers (docs/graph.md, "MCP server"); unset: the kit's default for GRAPH_URL. */
  MCP_ALLOWED_HOSTS: mcpAllowedHostsField,
})
  .superRefine(checkRendererConfig)
  .transform((config) => ({
    ...config,
    GRAPH_WORKERS: config.GRAPH_WORKERS ?? (config.DATABASE_URL ? [] : [...WORKER_ROLES]),
    MCP_ALLOWED_HOSTS: config.MCP_ALLOWED_HOSTS ?? defaultMcpAllowedHosts(config.GRAPH_URL, config.TEMPORA_DOMAIN),
  }));
export type GraphConfig = z.output<typeof GraphConfigSchema>;
