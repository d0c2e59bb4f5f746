import type { z } from 'zod';
import { GeminiProvider, OfflineProvider, OpenRouterProvider, type TextProvider } from '@tempora/kit/providers/index';
import type { SpendBudget } from './budget.ts';
import { textCallCeilingUsd, tokenCostUsd } from './costs.ts';
import type { WorkerConfig } from './config.ts';

export interface TextModel {
  provider: TextProvider;
  model: string;
}

/**
 * The generation service's choice for server defaults, reduced to what the workers need: the native
 * provider when its key is set, else the aggregator, else offline (deterministic, free, no keys).
 */
export function workerTextModel(config: WorkerConfig): TextModel {
  const http = { timeoutMs: config.PROVIDER_TIMEOUT_MS, retries: config.PROVIDER_RETRIES };
  if (config.GEMINI_API_KEY) {
    return { provider: new GeminiProvider({ ...http, apiKey: config.GEMINI_API_KEY, baseUrl: config.GEMINI_BASE_URL }), model: config.WORKER_TEXT_MODEL ?? 'gemini-2.5-flash' };
  }
  if (config.OPENROUTER_API_KEY || config.OPENROUTER_BASE_URL) {
    return {
      provider: new OpenRouterProvider({ ...http, apiKey: config.OPENROUTER_API_KEY, baseUrl: config.OPENROUTER_BASE_URL, title: 'Tempora graph worker' }),
      model: config.WORKER_TEXT_MODEL ?? 'google/gemini-2.5-flash',
    };
  }
  return { provider: new OfflineProvider(), model: 'offline' };
}

export class ModelReplyError extends Error {
  override name = 'ModelReplyError';
}

/** The reply as JSON; models sometimes wrap it in a code fence despite JSON mode. */
function parseReply(text: string): unknown {
  const fenced = /```(?:json)?\s*([\s\S]*?)```/i.exec(text);
  return JSON.parse(fenced?.[1] ?? text);
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
    parsed = parseReply(result.text);
  } catch {
    throw new ModelReplyError(`the model's reply is not JSON: ${result.text.slice(0, 200)}`);
  }
  const checked = ask.schema.safeParse(parsed);
  if (!checked.success) throw new ModelReplyError(`the model's reply does not match: ${checked.error.issues.map((issue) => `${issue.path.join('.')}: ${issue.message}`).join('; ')}`);
  return checked.data;
}
