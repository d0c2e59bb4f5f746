import {
  FREE_IMAGE_KEYWORD,
  GeminiProvider,
  OfflineProvider,
  OpenRouterProvider,
  PollinationsProvider,
  StabilityProvider,
  type ImageProvider,
  type ProviderKind,
  type TextProvider,
} from '@tempora/kit/providers/index';
import type { GenerationConfig } from './config.ts';

/** The providers this process can call; a kind is absent when it is not configured. */
export interface ProviderSet {
  text: Partial<Record<ProviderKind, TextProvider>>;
  image: Partial<Record<ProviderKind, ImageProvider>>;
  /** /health: one boolean per provider, true when configured. */
  configured: Record<'native' | 'aggregator' | 'image_vendor' | 'free_image' | 'offline', boolean>;
}

type ProviderConfig = Pick<
  GenerationConfig,
  | 'GEMINI_API_KEY'
  | 'GEMINI_BASE_URL'
  | 'OPENROUTER_API_KEY'
  | 'OPENROUTER_BASE_URL'
  | 'STABILITY_API_KEY'
  | 'STABILITY_BASE_URL'
  | 'POLLINATIONS_BASE_URL'
  | 'FREE_IMAGE_ENABLED'
  | 'PROVIDER_TIMEOUT_MS'
  | 'PROVIDER_RETRIES'
  | 'PROVIDER_BACKOFF_MS'
  | 'PROVIDER_MAX_BACKOFF_MS'
>;

export function createProviders(config: ProviderConfig): ProviderSet {
  const http = {
    timeoutMs: config.PROVIDER_TIMEOUT_MS,
    retries: config.PROVIDER_RETRIES,
    backoffMs: config.PROVIDER_BACKOFF_MS,
    maxBackoffMs: config.PROVIDER_MAX_BACKOFF_MS,
  };
  const offline = new OfflineProvider();
  const set: ProviderSet = {
    text: { offline },
    image: { offline },
    configured: { native: false, aggregator: false, image_vendor: false, free_image: false, offline: true },
  };
  if (config.GEMINI_API_KEY) {
    const native = new GeminiProvider({ ...http, apiKey: config.GEMINI_API_KEY, baseUrl: config.GEMINI_BASE_URL });
    set.text.native = native;
    set.image.native = native;
    set.configured.native = true;
  }
  // A base URL alone configures the aggregator: a local OpenAI-compatible server needs no key.
  if (config.OPENROUTER_API_KEY || config.OPENROUTER_BASE_URL) {
    const aggregator = new OpenRouterProvider({ ...http, apiKey: config.OPENROUTER_API_KEY, baseUrl: config.OPENROUTER_BASE_URL, title: 'Tempora' });
    set.text.aggregator = aggregator;
    set.image.aggregator = aggregator;
    set.configured.aggregator = true;
  }
  if (config.STABILITY_API_KEY) {
    set.image.image_vendor = new StabilityProvider({ ...http, apiKey: config.STABILITY_API_KEY, baseUrl: config.STABILITY_BASE_URL });
    set.configured.image_vendor = true;
  }
  if (config.FREE_IMAGE_ENABLED) {
    set.image.free_image = new PollinationsProvider({ ...http, baseUrl: config.POLLINATIONS_BASE_URL });
    set.configured.free_image = true;
  }
  return set;
}

export { FREE_IMAGE_KEYWORD };
