import { fidelityOf } from './fidelity.ts';

/**
 * What each model costs, in dollars per million tokens (so micro-dollars per token): the vendors' list
 * prices for text in and out (reasoning tokens are billed as output). A model missing here cannot be
 * chosen, so no call is ever priced by guessing from a model's name. The aggregator's `google/…` models
 * are the same models at the same price.
 */
export const PRICE_TABLE: Record<string, { input: number; output: number }> = {
  'gemini-2.5-flash-lite': { input: 0.1, output: 0.4 },
  'gemini-2.5-flash': { input: 0.3, output: 2.5 },
  'gemini-2.5-pro': { input: 1.25, output: 10 },
  'google/gemini-2.5-flash-lite': { input: 0.1, output: 0.4 },
  'google/gemini-2.5-flash': { input: 0.3, output: 2.5 },
  'google/gemini-2.5-pro': { input: 1.25, output: 10 },
  'openai/gpt-4o-mini': { input: 0.15, output: 0.6 },
  'openai/gpt-4o': { input: 2.5, output: 10 },
  'meta-llama/llama-3.3-70b-instruct': { input: 0.13, output: 0.4 },
};

/** The fidelity table's model (M18 off), and the three M18 chooses from by what a call does. */
export const DEFAULT_MODEL = 'gemini-2.5-flash';
export const LIGHT_MODEL = 'gemini-2.5-flash-lite';
export const STRONG_MODEL = 'gemini-2.5-pro';

/** The price-table name of a model on the aggregator (`google/…`) or the native provider (bare). */
export const bareModel = (model: string) => model.replace(/^google\//, '');

export const priceOf = (model: string) => PRICE_TABLE[model] ?? PRICE_TABLE[bareModel(model)];

/** Micro-dollars of a call, rounded up to the micro-dollar. */
export function costMicros(model: string, inputTokens: number, outputTokens: number): number {
  const price = priceOf(model);
  if (!price) throw new Error(`no price for model ${model}`);
  return Math.ceil(inputTokens * price.input + outputTokens * price.output);
}

/** What a call does, for M18 and for the allowance's weights. */
export type Action = 'plan' | 'entity' | 'scene' | 'antecedents' | 'director';

/** Calls that write for several entities at once get twice the allowance of an entity's call. */
export const ACTION_WEIGHT: Record<Action, number> = { plan: 2, entity: 1, scene: 2, antecedents: 2, director: 2 };

/**
 * M18, model selection per action: the light model for entity states up to resolution 3, the default one
 * above; the strong model for the calls that write scenes, plans, acts and candidate histories from
 * fidelity 3 up. Without M18 every call uses `base`.
 */
export function modelFor(action: Action, resolution: number, fidelity: number, m18: boolean, base: string): string {
  if (!m18) return base;
  if (action === 'entity') return resolution <= 3 ? LIGHT_MODEL : DEFAULT_MODEL;
  return fidelity >= 3 ? STRONG_MODEL : DEFAULT_MODEL;
}

/** How complex a plan is, 0 to 1, from the model calls it needs (a log scale from 6 to 240 calls). */
export function complexity(weightedCalls: number): number {
  const c = Math.log(Math.max(weightedCalls, 1) / 6) / Math.log(240 / 6);
  return Math.min(1, Math.max(0, c));
}

/**
 * A run's allowance in micro-dollars: the fidelity's band, placed by the plan's complexity. Every fidelity's
 * band lies above the one below, so a higher fidelity always costs more for the same plan.
 */
export function allowanceMicros(fidelity: number, weightedCalls: number): number {
  const [low, high] = fidelityOf(fidelity).band;
  return Math.round(low + complexity(weightedCalls) * (high - low));
}

/**
 * The output tokens one call may ask for: its share of the allowance (three quarters of it for output, the
 * rest for the prompt) at its model's output price, within the fidelity's cap and the caller's max_tokens.
 */
export function maxTokensFor(shareMicros: number, model: string, fidelity: number, requested?: number): number {
  const price = priceOf(model);
  if (!price) throw new Error(`no price for model ${model}`);
  const affordable = Math.floor((0.75 * shareMicros) / price.output);
  return Math.max(64, Math.min(affordable, fidelityOf(fidelity).maxTokensCap, requested ?? Number.POSITIVE_INFINITY));
}
