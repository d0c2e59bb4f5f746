import type { z } from 'zod';
import { ExposureRefused, type ExposureViolation } from './exposure.ts';
import type { RunModels } from './model.ts';
import type { Plan } from './plan.ts';
import { ACTION_WEIGHT, type Action, maxTokensFor, modelFor } from './pricing.ts';
import type { Mechanism } from './vocabulary.ts';

/** A step's view of its run: the plan, the models, the mechanisms, and where refusals are recorded. */
export interface StepContext {
  plan: Plan;
  models: RunModels;
  step: number;
  has(mechanism: Mechanism): boolean;
  exposureRetries: number;
  refusals: Array<{ step: number; call: string; attempt: number; violations: ExposureViolation[] }>;
}

/** The calls of one step may each spend their share of the run's allowance. */
export function callBudget(ctx: StepContext, action: Action, resolution: number): { model: string; maxTokens: number } {
  const { plan } = ctx;
  const model = modelFor(action, resolution, plan.fidelity, ctx.has('M18'), plan.baseModel);
  return { model, maxTokens: maxTokensFor(plan.shareMicros * ACTION_WEIGHT[action], model, plan.fidelity, plan.llm.max_tokens) };
}

export interface ValidatedAsk<S extends z.ZodType> {
  action: Action;
  /** The resolution the call writes at (M18 chooses the model by it). */
  resolution: number;
  system: string;
  prompt: string;
  schema: S;
  /** The offline provider's answer to the given attempt. */
  offline: (attempt: number) => z.input<S>;
}

/**
 * One model call of a step at its share of the allowance, asked until its answer passes `check` (the
 * exposure validator): a refused answer is recorded and asked again with the refusal named, up to
 * EXPOSURE_RETRIES times; then the step fails.
 */
export async function askValidated<S extends z.ZodType>(
  ctx: StepContext,
  call: string,
  ask: ValidatedAsk<S>,
  check: (value: z.output<S>) => ExposureViolation[] = () => [],
): Promise<{ value: z.output<S>; model: string }> {
  const budget = callBudget(ctx, ask.action, ask.resolution);
  let feedback: string | null = null;
  for (let attempt = 0; ; attempt += 1) {
    const { value } = await ctx.models.ask({
      action: ask.action,
      model: budget.model,
      maxTokens: budget.maxTokens,
      system: ask.system,
      prompt: feedback ? `${ask.prompt}\n${feedback}` : ask.prompt,
      schema: ask.schema,
      offline: () => ask.offline(attempt),
    });
    const violations = check(value);
    if (violations.length === 0) return { value, model: budget.model };
    ctx.refusals.push({ step: ctx.step, call, attempt, violations });
    if (attempt >= ctx.exposureRetries) throw new ExposureRefused(violations);
    feedback = `Your previous answer was refused: ${violations.map((v) => `${v.entity} cannot use ${v.fact} (${v.reason})`).join('; ')}. Use only the known facts.`;
  }
}
