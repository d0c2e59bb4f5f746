import { gatewayCallerConfigFields } from '@tempora/kit/http';
import { providerConfigFields } from '@tempora/kit/providers';
import { baseConfigSchema, csv } from '@tempora/kit/runtime';
import { z } from 'zod';

const optional = z
  .string()
  .optional()
  .transform((value) => (value && value.trim() !== '' ? value.trim() : undefined));
/** An optional variable holding JSON that must match `schema`. */
function jsonEnv<S extends z.ZodType>(schema: S) {
  return optional.transform((value, ctx): z.output<S> | undefined => {
    if (value === undefined) return undefined;
    let parsed: unknown;
    try {
      parsed = JSON.parse(value);
    } catch {
      ctx.addIssue({ code: 'custom', message: 'must be JSON' });
      return z.NEVER;
    }
    const result = schema.safeParse(parsed);
    if (!result.success) {
      ctx.addIssue({ code: 'custom', message: result.error.issues.map((issue) => `${issue.path.join('.') || '(value)'}: ${issue.message}`).join('; ') });
      return z.NEVER;
    }
    return result.data;
  });
}

const ms = (fallback: number, min = 1) => z.coerce.number().int().min(min).default(fallback);

export const GenerationConfigSchema = baseConfigSchema('generation').extend({
  ...providerConfigFields,
  /** The gateway's access tokens and their introspection: the kit's settings. */
  ...gatewayCallerConfigFields,
  /** Image vendor (SD3.5). */
  STABILITY_API_KEY: optional,
  STABILITY_BASE_URL: z.url().default('https://api.stability.ai'),
  /** Free image generator, used only when a request names its keyword. */
  POLLINATIONS_BASE_URL: z.url().default('https://image.pollinations.ai'),
  FREE_IMAGE_ENABLED: z
    .enum(['true', 'false'])
    .default('true')
    .transform((value) => value === 'true'),
  /** Server defaults (precedence step 4); unset: the balanced preset's models on the configured providers, else offline. */
  DEFAULT_TEXT_MODEL: optional,
  DEFAULT_IMAGE_MODEL: optional,
  /**
   * Operator-managed model presets (AgentPool spec.models.presets, JSON): entries named hyper, balanced, hd or
   * gemini3 replace that preset's text model (and optionally its temperature and max_tokens).
   */
  MODEL_PRESETS: jsonEnv(
    z.array(
      z.object({
        name: z.string().min(1),
        provider: z.string().min(1),
        model: z.string().min(1),
        temperature: z.number().min(0).max(2).optional(),
        maxTokens: z.number().int().min(1).max(32768).optional(),
      }),
    ),
  ),
  /** Operator-managed preset policy (AgentPool spec.models.policy, JSON): default preset, fallbacks, presets a request may select. */
  MODEL_POLICY: jsonEnv(z.object({ default: z.string().min(1), fallback: z.array(z.string()).optional(), allowed: z.array(z.string()).optional() })),
  /** Open-weight model used for every text agent under model_policy permissive. */
  PERMISSIVE_TEXT_MODEL: z.string().default('meta-llama/llama-3.3-70b-instruct'),
  /** Extra model calls allowed per agent when its output fails validation. */
  AGENT_REPAIR_ATTEMPTS: z.coerce.number().int().min(0).max(5).default(2),
  /** Whole-pipeline limit for sync, stream and async generations (504 beyond it). */
  GENERATION_TIMEOUT_MS: ms(300_000),
  /**
   * How long a stopping process waits for its generations (requests and async jobs with their callbacks);
   * unset, GENERATION_TIMEOUT_MS + CALLBACK_MARGIN_MS. Never below GENERATION_TIMEOUT_MS (GenerationServiceConfigSchema).
   */
  SHUTDOWN_GRACE_MS: z.coerce.number().int().min(0).optional(),
  /** An async job's lease: renewed every third of it while its process runs it; once lapsed, another replica takes the job over. */
  JOB_LEASE_MS: ms(30_000, 300),
  STREAM_HEARTBEAT_MS: ms(15_000),
  /** Look the query up in the graph service to ground the offline provider and Grounding. */
  GRAPH_LOOKUP: z
    .enum(['true', 'false'])
    .default('true')
    .transform((value) => value === 'true'),
  GRAPH_LOOKUP_TIMEOUT_MS: ms(1_500),
  /** in-process (default) or redis (tasks on a Redis stream, run by `npm run worker`). */
  AGENT_POOL: z.enum(['in-process', 'redis']).default('in-process'),
  /** A pool task idle this long (its worker stopped heartbeating) is redelivered to another worker. */
  AGENT_POOL_CLAIM_IDLE_MS: ms(15_000),
  AGENT_POOL_TASK_TIMEOUT_MS: ms(180_000),
  AGENT_POOL_CONCURRENCY: z.coerce.number().int().min(1).max(256).default(8),
  /** The pool's name (the operator's AgentPool): the label `pool` of tempora_generation_queue_depth, which the pool's autoscaler selects on. */
  AGENT_POOL_NAME: z.string().min(1).max(253).default('default'),
  /** HMAC-SHA256 key for callback signatures; without it callback_url is refused. */
  CALLBACK_SECRET: optional,
  /** Hosts, IPs or CIDRs that callbacks may reach although loopback or private. */
  CALLBACK_ALLOWLIST: csv,
  CALLBACK_MAX_ATTEMPTS: z.coerce.number().int().min(1).max(20).default(6),
  CALLBACK_BACKOFF_MS: ms(1_000),
  CALLBACK_TIMEOUT_MS: ms(10_000),
  /** Base of the image URLs this service hands out; default http://127.0.0.1:PORT (GENERATION_URL). */
  PUBLIC_URL: optional.pipe(z.url().optional()),
});

/** What the default shutdown grace gives a job's callback after the pipeline's own deadline. */
export const CALLBACK_MARGIN_MS = 30_000;

/**
 * The service's configuration: the fields above, with the shutdown grace derived from the generation
 * deadline. A grace shorter than that deadline is refused: a sync or stream generation cannot be handed to
 * another replica, so it would be cut off mid-render (docs/generation.md, "Shutdown").
 */
export const GenerationServiceConfigSchema = GenerationConfigSchema.transform((config, ctx) => {
  const grace = config.SHUTDOWN_GRACE_MS ?? config.GENERATION_TIMEOUT_MS + CALLBACK_MARGIN_MS;
  if (grace < config.GENERATION_TIMEOUT_MS)
    ctx.addIssue({
      code: 'custom',
      path: ['SHUTDOWN_GRACE_MS'],
      message: `${grace} ms is shorter than GENERATION_TIMEOUT_MS (${config.GENERATION_TIMEOUT_MS} ms): a stopping replica would cut generations off mid-render; unset it or give at least GENERATION_TIMEOUT_MS (${config.GENERATION_TIMEOUT_MS + CALLBACK_MARGIN_MS} lets callbacks be delivered too)`,
    });
  return { ...config, SHUTDOWN_GRACE_MS: grace };
});
export type GenerationConfig = z.output<typeof GenerationServiceConfigSchema>;
