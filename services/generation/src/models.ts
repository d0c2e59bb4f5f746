import type { ProblemFieldError } from '@tempora/kit/http';
import { FREE_IMAGE_KEYWORD, IMAGE_VENDOR, OFFLINE_MODEL, type ProviderKind, vendorModel } from '@tempora/kit/providers';
import type { ProviderSet } from './providers.ts';
import { type GenerateRequest, PRESETS, type Preset } from './schemas.ts';

export interface ModelChoice {
  provider: ProviderKind;
  model: string;
}

/** Which control chose a model (precedence step). */
export type ChoiceSource = 'explicit' | 'policy' | 'preset' | 'default';

export interface Selection {
  /** Every text agent (13 of the 14) uses this model. */
  text: ModelChoice & { source: ChoiceSource };
  /** ImageGen tries these in order. */
  images: Array<ModelChoice & { source: ChoiceSource }>;
  /** False under model_policy permissive (no native calls, grounding skipped). */
  grounding: boolean;
  preset: Preset;
  policy: 'permissive' | null;
  max_tokens: number;
  /** An operator preset's temperature: replaces the agents' built-in temperatures (llm_params still wins). */
  temperature?: number;
  warnings: string[];
}

interface PresetModels {
  native: string;
  aggregator: string;
  max_tokens: number;
  native_image: string;
  vendor_image: string;
  aggregator_image: string;
}

/** The presets (docs/generation.md): text model on the native provider or its aggregator twin, and the image chain. */
export const PRESET_MODELS: Record<Preset, PresetModels> = {
  hyper: {
    native: 'gemini-2.5-flash-lite',
    aggregator: 'google/gemini-2.5-flash-lite',
    max_tokens: 1024,
    native_image: 'gemini-2.5-flash-image',
    vendor_image: `${IMAGE_VENDOR}/sd3.5-large-turbo`,
    aggregator_image: 'google/gemini-2.5-flash-image',
  },
  balanced: {
    native: 'gemini-2.5-flash',
    aggregator: 'google/gemini-2.5-flash',
    max_tokens: 2048,
    native_image: 'gemini-2.5-flash-image',
    vendor_image: `${IMAGE_VENDOR}/sd3.5-medium`,
    aggregator_image: 'google/gemini-2.5-flash-image',
  },
  hd: {
    native: 'gemini-2.5-pro',
    aggregator: 'google/gemini-2.5-pro',
    max_tokens: 8192,
    native_image: 'gemini-2.5-flash-image',
    vendor_image: `${IMAGE_VENDOR}/sd3.5-large`,
    aggregator_image: 'google/gemini-2.5-flash-image',
  },
  gemini3: {
    native: 'gemini-3-pro-preview',
    aggregator: 'google/gemini-3-pro-preview',
    max_tokens: 8192,
    native_image: 'gemini-3-pro-image-preview',
    vendor_image: `${IMAGE_VENDOR}/sd3.5-large`,
    aggregator_image: 'google/gemini-3-pro-image-preview',
  },
};

export const PERMISSIVE_IMAGE_MODEL = `${IMAGE_VENDOR}/sd3.5-large-turbo`;

/** An operator's replacement for a preset's text model (MODEL_PRESETS). */
export interface PresetOverride {
  provider: ProviderKind;
  model: string;
  temperature?: number;
  max_tokens?: number;
}

export interface SelectionDefaults {
  defaultTextModel: string | undefined;
  defaultImageModel: string | undefined;
  permissiveTextModel: string;
  /** MODEL_PRESETS, by preset name. */
  presets?: Partial<Record<Preset, PresetOverride>>;
  /** MODEL_POLICY: the preset behind server defaults, the presets tried when one has no configured provider, the presets a request may name. */
  defaultPreset?: Preset;
  fallback?: Preset[];
  allowed?: Preset[];
}

/** MODEL_PRESETS / MODEL_POLICY as the operator writes them (AgentPool spec.models) into selection defaults. */
export function operatorDefaults(
  presets: Array<{ name: string; provider: string; model: string; temperature?: number; maxTokens?: number }> | undefined,
  policy: { default: string; fallback?: string[]; allowed?: string[] } | undefined,
): { defaults: Pick<SelectionDefaults, 'presets' | 'defaultPreset' | 'fallback' | 'allowed'>; ignored: string[] } {
  const known = (name: string): name is Preset => (PRESETS as readonly string[]).includes(name);
  const ignored: string[] = [];
  const overrides: Partial<Record<Preset, PresetOverride>> = {};
  for (const entry of presets ?? []) {
    const provider = PROVIDER_ALIASES[entry.provider.toLowerCase()] ?? textProviderOf(entry.model);
    if (!known(entry.name) || !provider) {
      ignored.push(entry.name);
      continue;
    }
    overrides[entry.name] = {
      provider,
      model: entry.model,
      ...(entry.temperature !== undefined ? { temperature: entry.temperature } : {}),
      ...(entry.maxTokens !== undefined ? { max_tokens: entry.maxTokens } : {}),
    };
  }
  const names = (list: string[] | undefined) =>
    (list ?? []).filter((name) => {
      if (known(name)) return true;
      ignored.push(name);
      return false;
    }) as Preset[];
  return {
    defaults: {
      presets: overrides,
      ...(policy && known(policy.default) ? { defaultPreset: policy.default } : {}),
      fallback: names(policy?.fallback),
      ...(policy?.allowed?.length ? { allowed: names(policy.allowed) } : {}),
    },
    ignored: policy && !known(policy.default) ? [...ignored, policy.default] : ignored,
  };
}

const PROVIDER_ALIASES: Record<string, ProviderKind> = {
  native: 'native',
  gemini: 'native',
  google: 'native',
  aggregator: 'aggregator',
  openrouter: 'aggregator',
  openai: 'aggregator',
  offline: 'offline',
};

const NAMES: Record<ProviderKind, string> = {
  native: 'the native provider (set GEMINI_API_KEY)',
  aggregator: 'the aggregator (set OPENROUTER_API_KEY or OPENROUTER_BASE_URL)',
  image_vendor: `the image vendor (set STABILITY_API_KEY)`,
  free_image: 'the free image generator (FREE_IMAGE_ENABLED is false)',
  offline: 'the offline provider',
};

/** Which provider serves a text model ID; undefined when the ID has no recognised form. */
export function textProviderOf(model: string): ProviderKind | undefined {
  if (model === OFFLINE_MODEL) return 'offline';
  if (model.startsWith('gemini-')) return 'native';
  if (/^[\w.-]+\/[\w.:-]+$/.test(model)) return 'aggregator';
  return undefined;
}

/** Which provider serves an image model ID. */
export function imageProviderOf(model: string): ProviderKind | undefined {
  if (model === OFFLINE_MODEL) return 'offline';
  if (model === FREE_IMAGE_KEYWORD) return 'free_image';
  if (model.startsWith(`${IMAGE_VENDOR}/`)) return vendorModel(model) ? 'image_vendor' : undefined;
  if (model.startsWith('gemini-')) return 'native';
  if (/^[\w.-]+\/[\w.:-]+$/.test(model)) return 'aggregator';
  return undefined;
}

/**
 * Model selection, highest first (platform-interface.md): explicit text_model / image_model, then
 * model_policy permissive, then preset, then server defaults. A model that was asked for (explicitly or by
 * policy) whose provider is not configured is refused with 422: the offline provider never stands in for it.
 */
export function selectModels(
  request: GenerateRequest,
  providers: ProviderSet,
  defaults: SelectionDefaults,
): { selection?: Selection; errors: ProblemFieldError[] } {
  const permissive = request.model_policy === 'permissive';
  const preset: Preset = request.preset ?? defaults.defaultPreset ?? 'balanced';
  const asked: SelectionContext = {
    request,
    defaults,
    configured: (kind) => Boolean(kind === 'offline' || providers.text[kind] || providers.image[kind]),
    permissive,
    preset,
    errors: [],
    warnings: [],
  };
  const { errors, warnings } = asked;
  if (request.preset && defaults.allowed && !defaults.allowed.includes(request.preset)) {
    errors.push({ path: 'body.preset', message: `this server allows the presets ${defaults.allowed.join(', ')}` });
  }
  const { text, used } = selectText(asked);
  const override = text?.source === 'preset' || text?.source === 'default' ? defaults.presets?.[used] : undefined;
  // Images only when asked for, but the chain is still reported.
  const images = selectImages(asked);

  if (errors.length > 0 || !text) return { errors };
  return {
    errors,
    selection: {
      text,
      images,
      grounding: !permissive,
      preset,
      policy: permissive ? 'permissive' : null,
      max_tokens: request.llm_params?.max_tokens ?? override?.max_tokens ?? PRESET_MODELS[preset].max_tokens,
      ...(override?.temperature !== undefined ? { temperature: override.temperature } : {}),
      warnings,
    },
  };
}

/** What each step of the selection reads, and where it records the request's refusals and the scene's warnings. */
interface SelectionContext {
  request: GenerateRequest;
  defaults: SelectionDefaults;
  configured: (kind: ProviderKind) => boolean;
  permissive: boolean;
  /** The preset asked for, else the server's default. */
  preset: Preset;
  errors: ProblemFieldError[];
  warnings: string[];
}

/** The text model, and the preset whose operator override applies to it (the fallback preset when one was used). */
function selectText(asked: SelectionContext): { text: Selection['text'] | undefined; used: Preset } {
  const { request, defaults, configured, errors, warnings, preset } = asked;
  let text: Selection['text'] | undefined;
  let used: Preset = preset;
  if (request.text_model) {
    const provider = textProviderOf(request.text_model);
    if (!provider) errors.push({ path: 'body.text_model', message: 'use `org/model` (aggregator) or a native model ID beginning `gemini-`' });
    else if (!configured(provider))
      errors.push({ path: 'body.text_model', message: `${request.text_model} needs ${NAMES[provider]}, which is not configured` });
    else text = { provider, model: request.text_model, source: 'explicit' };
  } else if (asked.permissive) {
    if (!configured('aggregator'))
      errors.push({ path: 'body.model_policy', message: `permissive generation uses open-weight models through ${NAMES.aggregator}, which is not configured` });
    else text = { provider: 'aggregator', model: defaults.permissiveTextModel, source: 'policy' };
  } else if (request.preset) {
    const found = resolvePreset(asked);
    if (found) {
      used = found.name;
      text = { ...found.choice, source: 'preset' };
    } else {
      text = { provider: 'offline', model: OFFLINE_MODEL, source: 'preset' };
      warnings.push(`preset ${preset}: no model provider is configured, so the offline provider rendered this scene`);
    }
  } else if (defaults.defaultTextModel) {
    const provider = textProviderOf(defaults.defaultTextModel) ?? 'offline';
    text = { provider, model: defaults.defaultTextModel, source: 'default' };
  } else {
    const found = resolvePreset(asked);
    if (found) used = found.name;
    text = found ? { ...found.choice, source: 'default' } : { provider: 'offline', model: OFFLINE_MODEL, source: 'default' };
  }
  return { text, used };
}

/** The first of the preset and then the fallback presets whose text model has a configured provider. */
function resolvePreset(asked: SelectionContext): { name: Preset; choice: ModelChoice } | undefined {
  const { preset, defaults } = asked;
  for (const name of [preset, ...(defaults.fallback ?? []).filter((name) => name !== preset)]) {
    const choice = presetText(asked, name);
    if (choice) {
      if (name !== preset) asked.warnings.push(`preset ${preset}: its provider is not configured, so the fallback preset ${name} was used`);
      return { name, choice };
    }
  }
  return undefined;
}

/** A preset's text model on a configured provider: the operator's override, else native, else its aggregator twin. */
function presetText({ defaults, configured }: SelectionContext, name: Preset): ModelChoice | undefined {
  const override = defaults.presets?.[name];
  if (override) return configured(override.provider) ? { provider: override.provider, model: override.model } : undefined;
  if (configured('native')) return { provider: 'native', model: PRESET_MODELS[name].native };
  if (configured('aggregator')) return { provider: 'aggregator', model: PRESET_MODELS[name].aggregator };
  return undefined;
}

/** The chain ImageGen tries; an unconfigured provider is refused only when the request generates an image. */
function selectImages({ request, defaults, configured, permissive, preset, errors, warnings }: SelectionContext): Selection['images'] {
  const presetModels = PRESET_MODELS[preset];
  const images: Selection['images'] = [];
  if (request.image_model) {
    const provider = imageProviderOf(request.image_model);
    if (!provider) {
      errors.push({
        path: 'body.image_model',
        message: `use ${IMAGE_VENDOR}/sd3.5-large-turbo, ${IMAGE_VENDOR}/sd3.5-large, ${IMAGE_VENDOR}/sd3.5-medium, ${FREE_IMAGE_KEYWORD}, a gemini-… image model or an org/model aggregator image model`,
      });
    } else if (!configured(provider)) {
      if (request.generate_image)
        errors.push({ path: 'body.image_model', message: `${request.image_model} needs ${NAMES[provider]}, which is not configured` });
    } else
      images.push({
        provider,
        model: provider === 'image_vendor' ? `${IMAGE_VENDOR}/${vendorModel(request.image_model)}` : request.image_model,
        source: 'explicit',
      });
  } else if (permissive) {
    if (configured('image_vendor')) images.push({ provider: 'image_vendor', model: PERMISSIVE_IMAGE_MODEL, source: 'policy' });
    else if (request.generate_image)
      errors.push({ path: 'body.model_policy', message: `permissive images come only from ${NAMES.image_vendor}, which is not configured` });
  } else if (!request.preset && defaults.defaultImageModel) {
    images.push({ provider: imageProviderOf(defaults.defaultImageModel) ?? 'offline', model: defaults.defaultImageModel, source: 'default' });
  } else {
    const source: ChoiceSource = request.preset ? 'preset' : 'default';
    if (configured('native')) images.push({ provider: 'native', model: presetModels.native_image, source });
    if (configured('image_vendor')) images.push({ provider: 'image_vendor', model: presetModels.vendor_image, source });
    if (configured('aggregator')) images.push({ provider: 'aggregator', model: presetModels.aggregator_image, source });
    if (images.length === 0) {
      images.push({ provider: 'offline', model: OFFLINE_MODEL, source });
      if (request.preset && request.generate_image) warnings.push(`preset ${preset}: no image provider is configured, so the offline provider drew the image`);
    }
  }
  return images;
}
