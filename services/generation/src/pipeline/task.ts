import { addUsage, type Citation, emptyUsage, extractJson, ProviderError, type ProviderKind, type SamplingParams, type Usage } from '@tempora/kit/providers';
import { type ImageGenOutput, TEXT_AGENTS } from '../agents/index.ts';
import type { AgentName, Brief, TextAgent, TextAgentName } from '../agents/types.ts';
import type { ModelChoice } from '../models.ts';
import type { ProviderSet } from '../providers.ts';
import { systemPrompt } from './params.ts';

/**
 * One agent call as a self-contained, JSON-serialisable task: what the in-process runner executes
 * directly and what the Redis agent pool carries to its workers.
 */
export interface AgentTask {
  id: string;
  agent: AgentName;
  brief: Brief;
  text?: ModelChoice;
  params?: SamplingParams;
  system_prefix?: string;
  system_suffix?: string;
  repair_attempts?: number;
  grounding?: boolean;
  images?: ModelChoice[];
  image?: { prompt: string; negative_prompt?: string; aspect_ratio?: string; seed?: number };
  /** W3C trace context of the coordinator's agent span. */
  trace?: Record<string, string>;
}

/** A provider failure the image chain absorbed by going on to the next provider. */
export interface Fallback {
  from: ProviderKind;
  to: ProviderKind;
  /** The failed call's error code, as generation_agent_errors_total counts it. */
  code: string;
}

export interface AgentSuccess {
  ok: true;
  /** Valid by the agent's schema (AgentOutput); plain JSON, as it crosses the agent pool. */
  output: unknown;
  provider: ProviderKind;
  model: string;
  usage: Usage;
  attempts: number;
  duration_ms: number;
  citations?: Citation[];
  warnings: string[];
  fallbacks?: Fallback[];
  /** ImageGen: the image bytes, base64 (or a remote URL). */
  image?: { data?: string; url?: string; mime_type: string };
}

export interface AgentFailure {
  ok: false;
  error: { message: string; code: string; provider?: ProviderKind; status?: number };
  usage: Usage;
  duration_ms: number;
  fallbacks?: Fallback[];
}

export type AgentOutcome = AgentSuccess | AgentFailure;

const codeOf = (error: unknown): string =>
  error instanceof ProviderError
    ? error.code
    : ((error as { code?: string })?.code ?? (error instanceof Error && error.name === 'AbortError' ? 'cancelled' : 'failed'));

function failure(error: unknown, usage: Usage, started: number): AgentFailure {
  if (error instanceof ProviderError) {
    return {
      ok: false,
      error: { message: error.message, code: error.code, provider: error.provider, status: error.status },
      usage,
      duration_ms: Date.now() - started,
    };
  }
  const message = error instanceof Error ? error.message : String(error);
  return { ok: false, error: { message, code: codeOf(error) }, usage, duration_ms: Date.now() - started };
}

async function runText(task: AgentTask, providers: ProviderSet, signal: AbortSignal, started: number): Promise<AgentOutcome> {
  const agent: TextAgent | undefined = TEXT_AGENTS[task.agent as TextAgentName];
  const choice = task.text;
  const usage = emptyUsage();
  if (!agent || !choice) return failure(new Error(`no text model for ${task.agent}`), usage, started);
  const provider = providers.text[choice.provider];
  if (!provider) return failure(Object.assign(new Error(`${choice.provider} is not configured in this process`), { code: 'unconfigured' }), usage, started);
  const system = systemPrompt(agent.system, task.system_prefix, task.system_suffix);
  const basePrompt = agent.prompt(task.brief);
  const budget = 1 + (task.repair_attempts ?? 2);
  let prompt = basePrompt;
  let lastProblem = '';
  const citations: Citation[] = [];
  try {
    for (let attempt = 1; attempt <= budget; attempt += 1) {
      const result = await provider.generateText({
        model: choice.model,
        system,
        prompt,
        json: true,
        params: task.params,
        grounding: Boolean(task.grounding && agent.grounding && choice.provider === 'native'),
        signal,
        synthesize: () => agent.offline(task.brief),
      });
      addUsage(usage, result.usage);
      citations.push(...(result.citations ?? []));
      let parsed: unknown;
      try {
        parsed = extractJson(result.text);
      } catch (error) {
        lastProblem = `the reply is not JSON (${(error as Error).message})`;
      }
      if (parsed !== undefined) {
        const merged = parsed && typeof parsed === 'object' && !Array.isArray(parsed) ? { ...agent.defaults, ...(parsed as object) } : parsed;
        const checked = agent.schema.safeParse(merged);
        if (checked.success) {
          return {
            ok: true,
            output: checked.data,
            provider: result.provider,
            model: result.model,
            usage,
            attempts: attempt,
            duration_ms: Date.now() - started,
            citations,
            warnings: [],
          };
        }
        lastProblem = checked.error.issues
          .slice(0, 8)
          .map((issue) => `${issue.path.join('.') || '(root)'}: ${issue.message}`)
          .join('; ');
      }
      prompt = `${basePrompt}\n\nYour previous reply was invalid: ${lastProblem}.\nPrevious reply (truncated): ${result.text.slice(0, 1500)}\nReply again with only the corrected JSON object.`;
    }
    return failure(
      Object.assign(new Error(`${task.agent} returned invalid output ${budget} times: ${lastProblem}`), { code: 'invalid_output' }),
      usage,
      started,
    );
  } catch (error) {
    return failure(error, usage, started);
  }
}

/**
 * ImageGen renders the optimised prompt with the first image model of the chain that succeeds (native, then
 * image vendor, then aggregator; permissive: image vendor only); each failure is a warning, and each one the
 * next provider absorbs is a fallback in the outcome, for the metrics (the last failure is the outcome's error).
 */
async function runImage(task: AgentTask, providers: ProviderSet, signal: AbortSignal, started: number): Promise<AgentOutcome> {
  const usage = emptyUsage();
  const warnings: string[] = [];
  const fallbacks: Fallback[] = [];
  let lastError: unknown = new Error('no image model was selected');
  let failed: { provider: ProviderKind; code: string } | undefined;
  for (const choice of task.images ?? []) {
    const provider = providers.image[choice.provider];
    if (!provider) {
      // A provider this process lacks was never called: nothing failed, so no fallback is counted.
      warnings.push(`${choice.model}: ${choice.provider} is not configured in this process`);
      continue;
    }
    if (failed) fallbacks.push({ from: failed.provider, to: choice.provider, code: failed.code });
    try {
      const result = await provider.generateImage({
        model: choice.model,
        prompt: task.image?.prompt ?? task.brief.query,
        negative_prompt: task.image?.negative_prompt,
        aspect_ratio: task.image?.aspect_ratio,
        seed: task.image?.seed,
        signal,
      });
      addUsage(usage, result.usage);
      const output: ImageGenOutput = { model: result.model, provider: result.provider, mime_type: result.mime_type };
      return {
        ok: true,
        output,
        provider: result.provider,
        model: result.model,
        usage,
        attempts: 1,
        duration_ms: Date.now() - started,
        warnings,
        ...(fallbacks.length ? { fallbacks } : {}),
        image: { data: result.data?.toString('base64'), url: result.url, mime_type: result.mime_type },
      };
    } catch (error) {
      if (signal.aborted) return { ...failure(error, usage, started), ...(fallbacks.length ? { fallbacks } : {}) };
      lastError = error;
      failed = { provider: choice.provider, code: codeOf(error) };
      warnings.push(`${choice.model} failed: ${(error as Error).message}`);
    }
  }
  const outcome: AgentFailure = { ...failure(lastError, usage, started), ...(fallbacks.length ? { fallbacks } : {}) };
  if (warnings.length) outcome.error.message = warnings.join('; ');
  return outcome;
}

/** Executes one task with the given providers: validation, bounded repair and (ImageGen) the fallback chain. */
export async function executeTask(task: AgentTask, providers: ProviderSet, signal: AbortSignal): Promise<AgentOutcome> {
  const started = Date.now();
  return task.agent === 'ImageGen' ? runImage(task, providers, signal, started) : runText(task, providers, signal, started);
}
