import { z } from 'zod';
import { optionalString } from '../runtime/config.ts';
import { GeminiProvider } from './gemini.ts';
import { OfflineProvider } from './offline.ts';
import { OpenRouterProvider } from './openrouter.ts';

const ms = (fallback: number, min = 1) => z.coerce.number().int().min(min).default(fallback);

/** The model vendors' settings every process that calls a model shares (extend a config schema with them). */
export const providerConfigFields = {
  /** Native provider (Gemini generateContent). Unset: the native provider is not configured. */
  GEMINI_API_KEY: optionalString,
  GEMINI_BASE_URL: z.url().default('https://generativelanguage.googleapis.com'),
  /** Aggregator (OpenRouter, or any OpenAI-compatible server when OPENROUTER_BASE_URL is set). */
  OPENROUTER_API_KEY: optionalString,
  OPENROUTER_BASE_URL: optionalString.pipe(z.url().optional()),
  PROVIDER_TIMEOUT_MS: ms(60_000),
  PROVIDER_RETRIES: z.coerce.number().int().min(0).max(10).default(3),
  PROVIDER_BACKOFF_MS: ms(500, 0),
  PROVIDER_MAX_BACKOFF_MS: ms(30_000, 0),
};
const ProviderConfig = z.object(providerConfigFields);
export type ProviderConfig = z.output<typeof ProviderConfig>;

/** The HTTP behaviour of every vendor call: timeout, retries and their back-off. */
export const providerHttp = (config: ProviderConfig) => ({
  timeoutMs: config.PROVIDER_TIMEOUT_MS,
  retries: config.PROVIDER_RETRIES,
  backoffMs: config.PROVIDER_BACKOFF_MS,
  maxBackoffMs: config.PROVIDER_MAX_BACKOFF_MS,
});

/**
 * The text providers `config` configures: native when GEMINI_API_KEY is set, the aggregator when its key
 * or base URL is (a local OpenAI-compatible server needs no key), and always offline.
 */
export function textProviders(config: ProviderConfig, title: string): { native?: GeminiProvider; aggregator?: OpenRouterProvider; offline: OfflineProvider } {
  const http = providerHttp(config);
  return {
    ...(config.GEMINI_API_KEY ? { native: new GeminiProvider({ ...http, apiKey: config.GEMINI_API_KEY, baseUrl: config.GEMINI_BASE_URL }) } : {}),
    ...(config.OPENROUTER_API_KEY || config.OPENROUTER_BASE_URL
      ? { aggregator: new OpenRouterProvider({ ...http, apiKey: config.OPENROUTER_API_KEY, baseUrl: config.OPENROUTER_BASE_URL, title }) }
      : {}),
    offline: new OfflineProvider(),
  };
}

/** A model's reply as JSON: code fences and prose around the object are tolerated (JSON mode is not always kept). */
export function extractJson(text: string): unknown {
  const trimmed = text.trim();
  try {
    return JSON.parse(trimmed);
  } catch {
    const fenced = /```(?:json)?\s*([\s\S]*?)```/i.exec(trimmed);
    const candidate = fenced?.[1] ?? trimmed.slice(trimmed.indexOf('{'), trimmed.lastIndexOf('}') + 1);
    if (!candidate) throw new SyntaxError('no JSON object in the reply');
    return JSON.parse(candidate);
  }
}
