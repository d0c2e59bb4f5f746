import { LlmParamsSchema } from '@tempora/kit/providers';
import { z } from 'zod';
import { PRICE_TABLE } from './domain/pricing.ts';
import { MECHANISM_IDS, MODES } from './domain/vocabulary.ts';

/** The spec's list envelope, which every list here answers. */

const upper = (value: unknown) => (typeof value === 'string' ? value.trim().toUpperCase() : value);

export const SimulateRequestSchema = z
  .strictObject({
    template: z.string().trim().min(1).max(64).optional().meta({ description: 'one of the 21 templates (GET /api/v1/simulate/templates)' }),
    prompt: z.string().trim().min(3).max(4000).optional().meta({ description: 'free-form scenario; with a template, it directs the run' }),
    mode: z.preprocess(upper, z.enum(MODES)).optional().meta({ description: "default: the template's mode, FORWARD for a prompt" }),
    fidelity: z.number().int().min(1).max(5).default(3).meta({ description: '1 to 5 (docs/simulation.md, "Fidelity"); default 3' }),
    mechanisms: z
      .array(z.preprocess(upper, z.enum(MECHANISM_IDS as [string, ...string[]])))
      .max(19)
      .refine((list) => new Set(list).size === list.length, 'mechanisms repeat')
      .optional()
      .meta({ description: "a subset of M1–M19; default: the template's, or M3, M7, M11, M13 for a prompt; [] runs with none" }),
    llm_params: LlmParamsSchema.optional().meta({
      description: 'applied to every model call of the run; max_tokens caps each call below what the fidelity allows',
    }),
    text_model: z
      .string()
      .trim()
      .refine((model) => model in PRICE_TABLE, { message: `must be a model of the price table: ${Object.keys(PRICE_TABLE).join(', ')}` })
      .optional()
      .meta({ description: "replaces the fidelity table's model for every call (M18 still chooses per action when on)" }),
    seed: z
      .string()
      .regex(/^[A-Za-z0-9._-]{1,64}$/)
      .optional()
      .meta({ description: "the offline provider's answers derive from it (default: the run's id): the same request and seed reproduce a run" }),
    max_cost_usd: z
      .number()
      .min(0.01)
      .max(1)
      .optional()
      .meta({ description: "this run's own maximum; it stops at the next step when reached, its partial result kept" }),
  })
  .refine((body) => body.template !== undefined || body.prompt !== undefined, { message: 'give a template, a prompt, or both', path: ['template'] })
  .meta({ id: 'SimulateRequest' });
export type SimulateRequest = z.output<typeof SimulateRequestSchema>;

/** RFC 8941's sf-string, the draft's form of the header: printable ASCII in double quotes, with `\"` and `\\` escaped. */
export const RunSchema = z
  .object({
    id: z.uuid(),
    status: z.enum(['queued', 'running', 'completed', 'stopped', 'cancelled', 'failed']),
    mode: z.enum(MODES),
    fidelity: z.number().int(),
    template: z.string().nullable(),
    prompt: z.string().nullable(),
    mechanisms: z.array(z.string()),
    progress: z.object({ steps_done: z.number().int(), steps_total: z.number().int(), percent: z.number() }),
    cost: z.object({
      currency: z.literal('USD'),
      estimate_usd: z.number(),
      max_usd: z.number(),
      actual_usd: z.number(),
      calls: z.number().int(),
      tokens: z.object({ input: z.number(), output: z.number(), thinking: z.number() }),
    }),
    budgets: z.array(z.object({ budget: z.string(), period: z.string(), reserved_usd: z.number() })),
    partial: z.object({ reason: z.string(), detail: z.string() }).nullable(),
    error: z.object({ status: z.number(), detail: z.string() }).passthrough().nullable(),
    cancel_requested: z.boolean(),
    created_at: z.string(),
    started_at: z.string().nullable(),
    finished_at: z.string().nullable(),
    links: z.object({ self: z.string(), result: z.string(), events: z.string(), cancel: z.string() }),
  })
  .passthrough()
  .meta({ id: 'SimulationRun' });

export const BudgetViewSchema = z
  .object({
    name: z.string(),
    scope: z.string(),
    period: z.enum(['daily', 'monthly']),
    current_period: z.string(),
    limit_usd: z.number(),
    per_run_max_usd: z.number().nullable(),
    spent_usd: z.number(),
    reserved_usd: z.number(),
    remaining_usd: z.number(),
    runs: z.number().int(),
    alert_thresholds: z.array(z.number()),
    alerts_crossed: z.array(z.number()),
    exhausted: z.boolean(),
  })
  .meta({ id: 'SimulationBudgetStatus' });

export const UsageSchema = z
  .object({
    user: z.string().nullable(),
    budget: z.string().nullable(),
    from: z.string(),
    to: z.string(),
    runs: z.number().int(),
    by_status: z.record(z.string(), z.number().int()).meta({ description: 'runs by status (only the statuses that occur)' }),
    cost_usd: z.number(),
    tokens: z.object({ input: z.number().int(), output: z.number().int() }),
    calls: z.number().int(),
    by_model: z.array(
      z.object({
        model: z.string(),
        provider: z.string(),
        calls: z.number().int(),
        cost_usd: z.number(),
        input_tokens: z.number().int(),
        output_tokens: z.number().int(),
      }),
    ),
  })
  .meta({ id: 'SimulationUsage' });

/**
 * What every result holds (docs/simulation.md, "The result"); the rest (the mode's own section, provenance,
 * knowledge, cost, models…) varies by mode and mechanisms, so it is documented in prose and passed on.
 */
const ResultSchema = z.looseObject({
  title: z.string().nullable(),
  entities: z.array(z.record(z.string(), z.unknown())),
  timepoints: z.array(z.record(z.string(), z.unknown())),
  confidence: z.looseObject({ run: z.number() }),
});

export const RunResultSchema = z.object({ run: RunSchema, result: ResultSchema }).meta({ id: 'SimulationRunResult' });
