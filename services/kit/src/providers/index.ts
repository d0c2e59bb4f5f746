export * from './types.ts';
export { callProvider, retryAfterMs, type HttpCallOptions, type ProviderHttpSettings } from './http.ts';
export { GeminiProvider, thinkingConfig, type GeminiOptions } from './gemini.ts';
export { OpenRouterProvider, type OpenRouterOptions } from './openrouter.ts';
export { StabilityProvider, IMAGE_VENDOR, IMAGE_VENDOR_MODELS, vendorModel, type StabilityOptions } from './stability.ts';
export { PollinationsProvider, FREE_IMAGE_KEYWORD, type PollinationsOptions } from './pollinations.ts';
export { OfflineProvider, OFFLINE_MODEL, seedOf, sequence } from './offline.ts';
export { extractJson, providerConfigFields, providerHttp, textProviders, type ProviderConfig } from './text-providers.ts';
export { GEN_AI_PROVIDER_NAMES, type GenAiOperation } from './telemetry.ts';
