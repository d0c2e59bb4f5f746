/**
 * llm_params, shaped here for every use: the sampling parameters of each agent call (built-in defaults
 * under the request's values), routed to what the selected provider takes, the system prompt wrapped in
 * the prefix and suffix, and the parameters as the scene records them.
 */
import { AGGREGATOR_ONLY_PARAMS, type LlmParams, NATIVE_ONLY_PARAMS, type ProviderKind, type SamplingParams } from '@tempora/kit/providers';
import { TEXT_AGENTS } from '../agents/index.ts';
import { TEMPERATURES, type TextAgentName } from '../agents/types.ts';
import type { Selection } from '../models.ts';

/** The sampling part of llm_params (the system prompt parts wrap the prompt instead). */
function samplingOf(llm: LlmParams | undefined): SamplingParams {
  const { system_prompt_prefix: _prefix, system_prompt_suffix: _suffix, ...sampling } = llm ?? {};
  return sampling;
}

/** Sampling parameters of one agent call: built-in temperature and preset max_tokens under llm_params. */
function agentParams(agent: TextAgentName, maxTokens: number, llm: LlmParams | undefined, presetTemperature?: number): SamplingParams {
  return { temperature: presetTemperature ?? TEMPERATURES[TEXT_AGENTS[agent].temperament], max_tokens: maxTokens, ...samplingOf(llm) };
}

/** llm_params a provider does not take are not sent to it (and the scene says so). */
function routeParams(params: SamplingParams, provider: ProviderKind): { params: SamplingParams; dropped: string[] } {
  const drop: readonly string[] = provider === 'native' ? AGGREGATOR_ONLY_PARAMS : provider === 'aggregator' ? NATIVE_ONLY_PARAMS : [];
  const kept: Record<string, unknown> = {};
  const dropped: string[] = [];
  for (const [name, value] of Object.entries(params)) {
    if (value === undefined) continue;
    if (drop.includes(name)) dropped.push(name);
    else kept[name] = value;
  }
  return { params: kept as SamplingParams, dropped };
}

/** What one text agent's call is sent with on the selected text model. */
export function callParams(
  agent: TextAgentName,
  selection: Selection,
  llm: LlmParams | undefined,
): { params: SamplingParams; system_prefix?: string; system_suffix?: string } {
  return {
    params: routeParams(agentParams(agent, selection.max_tokens, llm, selection.temperature), selection.text.provider).params,
    system_prefix: llm?.system_prompt_prefix,
    system_suffix: llm?.system_prompt_suffix,
  };
}

/** The scene's warnings for llm_params the selected text provider does not take (the same for every agent). */
export function unsentParamWarnings(selection: Selection, llm: LlmParams | undefined): string[] {
  const { dropped } = routeParams(samplingOf(llm), selection.text.provider);
  return dropped.map((name) => `llm_params.${name} is not supported by the ${selection.text.provider} provider and was not sent`);
}

/** Wraps the agent's system prompt in llm_params.system_prompt_prefix / suffix. */
export const systemPrompt = (system: string, prefix?: string, suffix?: string) =>
  [prefix, system, suffix].filter((part) => part !== undefined && part !== '').join('\n\n');

/** llm_params as the scene records them: as sent, without empty system prompt parts. */
export function recordedParams(llm: LlmParams | undefined): Record<string, unknown> {
  const { system_prompt_prefix: prefix, system_prompt_suffix: suffix } = llm ?? {};
  return { ...samplingOf(llm), ...(prefix ? { system_prompt_prefix: prefix } : {}), ...(suffix ? { system_prompt_suffix: suffix } : {}) };
}
