import {
  type ImageProvider,
  PollinationsProvider,
  type ProviderConfig,
  type ProviderKind,
  providerHttp,
  StabilityProvider,
  type TextProvider,
  textProviders,
} from '@tempora/kit/providers';
import type { GenerationConfig } from './config.ts';

/** The providers this process can call; a kind is absent when it is not configured. */
export interface ProviderSet {
  text: Partial<Record<ProviderKind, TextProvider>>;
  image: Partial<Record<ProviderKind, ImageProvider>>;
  /** /health: one boolean per provider, true when configured. */
  configured: Record<'native' | 'aggregator' | 'image_vendor' | 'free_image' | 'offline', boolean>;
}

type ProviderSettings = ProviderConfig & Pick<GenerationConfig, 'STABILITY_API_KEY' | 'STABILITY_BASE_URL' | 'POLLINATIONS_BASE_URL' | 'FREE_IMAGE_ENABLED'>;

export function createProviders(config: ProviderSettings): ProviderSet {
  const http = providerHttp(config);
  const { native, aggregator, offline } = textProviders(config, 'Tempora');
  const set: ProviderSet = {
    text: { offline, ...(native ? { native } : {}), ...(aggregator ? { aggregator } : {}) },
    image: { offline, ...(native ? { native } : {}), ...(aggregator ? { aggregator } : {}) },
    configured: { native: Boolean(native), aggregator: Boolean(aggregator), image_vendor: false, free_image: false, offline: true },
  };
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
