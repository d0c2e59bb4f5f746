import { extractJson, type ProviderConfig, type TextProvider, textProviders } from '@tempora/kit/providers';
import type { z } from 'zod';
import type { SpendBudget } from './budget.ts';
import { textCallCeilingUsd, tokenCostUsd } from './costs.ts';

export interface TextModel {
  provider: TextProvider;
  model: string;
}

/** The generation service's choice for server defaults: native, else the aggregator, else offline (free, no keys). */
export function workerTextModel(config: ProviderConfig & { WORKER_TEXT_MODEL?: string | undefined }): TextModel {
  const { native, aggregator, offline } = textProviders(config, 'Tempora graph worker');
  if (native) return { provider: native, model: config.WORKER_TEXT_MODEL ?? 'gemini-2.5-flash' };
  if (aggregator) return { provider: aggregator, model: config.WORKER_TEXT_MODEL ?? 'google/gemini-2.5-flash' };
  return { provider: offline, model: 'offline' };
}

export class ModelReplyError extends Error {
  override name = 'ModelReplyError';
}

export interface JsonAsk<S extends z.ZodType> {
  system: string;
  prompt: string;
  schema: S;
  /** The offline provider's deterministic reply. */
  offline: () => z.input<S>;
  maxTokens: number;
  signal?: AbortSignal;
}

/**
 * One JSON-mode call, charged to `budget` at its ceiling before it is made and settled at the tokens the
 * provider reports; the reply must satisfy `schema` (ModelReplyError otherwise).
 */
export async function askJson<S extends z.ZodType>(model: TextModel, budget: SpendBudget, ask: JsonAsk<S>): Promise<z.output<S>> {
  const kind = model.provider.kind;
  const reservation = await budget.charge(textCallCeilingUsd(kind, ask.system + ask.prompt, ask.maxTokens));
  // A call that throws keeps its reservation: it may have been billed, and that errs on the side of the budget.
  const result = await model.provider.generateText({
    model: model.model,
    system: ask.system,
    prompt: ask.prompt,
    json: true,
    params: { temperature: 0.2, max_tokens: ask.maxTokens },
    synthesize: ask.offline,
    ...(ask.signal ? { signal: ask.signal } : {}),
  });
  await budget.settle(reservation, tokenCostUsd(result.provider, result.usage));
  let parsed: unknown;
  try {
    parsed = extractJson(result.text);
  } catch {
    throw new ModelReplyError(`the model's reply is not JSON: ${result.text.slice(0, 200)}`);
  }
  const checked = ask.schema.safeParse(parsed);
  if (!checked.success)
    throw new ModelReplyError(
      `the model's reply does not match: ${checked.error.issues.map((issue) => `${issue.path.join('.')}: ${issue.message}`).join('; ')}`,
    );
  return checked.data;
}
