import { OFFLINE_MODEL, type ProviderKind, type ToolCallingProvider } from '@tempora/kit/providers';
import { ConfigError } from '@tempora/kit/runtime';

export interface ModelChoice {
  provider: ToolCallingProvider;
  kind: ProviderKind;
  model: string;
  /** Which rule chose it: `explicit`, `policy` or `default`. */
  source: 'explicit' | 'policy' | 'default';
}

export interface ModelSettings {
  CONDUCTOR_MODEL?: string | undefined;
  CONDUCTOR_MODEL_POLICY?: 'permissive' | undefined;
  CONDUCTOR_PERMISSIVE_MODEL: string;
  CONDUCTOR_NATIVE_MODEL: string;
  CONDUCTOR_AGGREGATOR_MODEL: string;
}

export interface AvailableProviders {
  native?: ToolCallingProvider;
  aggregator?: ToolCallingProvider;
  offline: ToolCallingProvider;
}

/**
 * The spec's model-selection precedence, where it applies to the conductor (no per-request preset):
 * an explicit model, then the permissive policy, then the server default. A provider that was asked for
 * but is not configured stops the start-up: the offline planner never silently stands in for it.
 */
export function chooseModel(settings: ModelSettings, providers: AvailableProviders): ModelChoice {
  const explicit = settings.CONDUCTOR_MODEL;
  if (explicit) {
    if (explicit === OFFLINE_MODEL) return { provider: providers.offline, kind: 'offline', model: OFFLINE_MODEL, source: 'explicit' };
    const kind = explicit.startsWith('gemini-') ? 'native' : explicit.includes('/') ? 'aggregator' : undefined;
    if (!kind) throw new ConfigError(`CONDUCTOR_MODEL: ${explicit} is neither a native model (gemini-…), an aggregator model (org/model) nor offline`);
    const provider = providers[kind];
    if (!provider)
      throw new ConfigError(
        `CONDUCTOR_MODEL: ${explicit} needs the ${kind} provider, which is not configured (${kind === 'native' ? 'GEMINI_API_KEY' : 'OPENROUTER_API_KEY or OPENROUTER_BASE_URL'})`,
      );
    return { provider, kind, model: explicit, source: 'explicit' };
  }
  if (settings.CONDUCTOR_MODEL_POLICY === 'permissive') {
    if (!providers.aggregator) throw new ConfigError('CONDUCTOR_MODEL_POLICY: permissive needs the aggregator (OPENROUTER_API_KEY or OPENROUTER_BASE_URL)');
    return { provider: providers.aggregator, kind: 'aggregator', model: settings.CONDUCTOR_PERMISSIVE_MODEL, source: 'policy' };
  }
  if (providers.native) return { provider: providers.native, kind: 'native', model: settings.CONDUCTOR_NATIVE_MODEL, source: 'default' };
  if (providers.aggregator) return { provider: providers.aggregator, kind: 'aggregator', model: settings.CONDUCTOR_AGGREGATOR_MODEL, source: 'default' };
  return { provider: providers.offline, kind: 'offline', model: OFFLINE_MODEL, source: 'default' };
}
