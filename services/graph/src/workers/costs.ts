import { estimateTokens, type ProviderKind, type Usage } from '@tempora/kit/providers';

/**
 * Estimated dollars of one synchronous render, by preset: the pipeline's ~14 text calls of a few thousand
 * tokens each at the preset model's list price, plus one image. The generation service reports tokens but
 * no price, so the renderer charges these figures up front and does not settle them.
 */
export const RENDER_COST_USD = { hyper: 0.01, balanced: 0.03, hd: 0.12, gemini3: 0.15 } as const;
export const IMAGE_COST_USD = 0.04;

export function renderCostUsd(request: { preset?: unknown; generate_image?: unknown }): number {
  const preset = typeof request.preset === 'string' && request.preset in RENDER_COST_USD ? (request.preset as keyof typeof RENDER_COST_USD) : 'balanced';
  return RENDER_COST_USD[preset] + (request.generate_image === false ? 0 : IMAGE_COST_USD);
}

/** Dollars per million tokens (input, output) by provider kind: the default models' list prices; offline is free. */
const TOKEN_PRICES: Partial<Record<ProviderKind, { input: number; output: number }>> = {
  native: { input: 0.3, output: 2.5 },
  aggregator: { input: 0.3, output: 2.5 },
};

export function tokenCostUsd(provider: ProviderKind, usage: Pick<Usage, 'input_tokens' | 'output_tokens'>): number {
  const price = TOKEN_PRICES[provider];
  return price ? (usage.input_tokens * price.input + usage.output_tokens * price.output) / 1e6 : 0;
}

/** The most a text call can cost: its prompt and `maxTokens` of output. */
export const textCallCeilingUsd = (provider: ProviderKind, prompt: string, maxTokens: number): number =>
  tokenCostUsd(provider, { input_tokens: estimateTokens(prompt), output_tokens: maxTokens });
