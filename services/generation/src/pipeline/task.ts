import {
  addUsage,
  type Citation,
  emptyUsage,
  extractJson,
  GEN_AI_PROVIDER_NAMES,
  ProviderError,
  type ProviderKind,
  type SamplingParams,
  type Usage,
} from '@tempora/kit/providers';
import { z } from 'zod';
import { type ImageGenOutput, TEXT_AGENTS } from '../agents/index.ts';
import { AGENT_NAMES, type Brief, type TextAgent, type TextAgentName } from '../agents/types.ts';
import type { ModelChoice } from '../models.ts';
import type { ProviderSet } from '../providers.ts';
import { systemPrompt } from './params.ts';

/** The provider kinds, from the kit's record of every kind (so the list cannot fall behind ProviderKind). */
const ProviderKindSchema = z.enum(Object.keys(GEN_AI_PROVIDER_NAMES) as [ProviderKind, ...ProviderKind[]]);

const ModelChoiceSchema = z.object({ provider: ProviderKindSchema, model: z.string() }) satisfies z.ZodType<ModelChoice>;

/** Types only: the request's llm_params were checked at its route, and presets may set values outside those ranges. */
const SamplingParamsSchema = z.object({
  temperature: z.number().optional(),
  max_tokens: z.number().int().optional(),
  top_p: z.number().optional(),
  top_k: z.number().int().optional(),
  stop: z.array(z.string()).optional(),
  frequency_penalty: z.number().optional(),
  presence_penalty: z.number().optional(),
  repetition_penalty: z.number().optional(),
  thinking_level: z.enum(['none', 'low', 'medium', 'high']).optional(),
}) satisfies z.ZodType<SamplingParams>;

const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

/** The brief stays loose: each agent reads what its prompt needs from it, and its output is checked by its schema. */
const BriefSchema = z.custom<Brief>(
  (value) => isRecord(value) && typeof value.query === 'string' && (value.graph_moment === null || isRecord(value.graph_moment)),
  'a brief is an object with a query and a graph_moment (an object or null)',
);

/**
 * One agent call as a self-contained, JSON-serialisable task: what the in-process runner executes
 * directly and what the Redis agent pool carries to its workers, which parse it with this schema.
 */
export const AgentTaskSchema = z.object({
  id: z.string().min(1),
  agent: z.enum(AGENT_NAMES),
  brief: BriefSchema,
  text: ModelChoiceSchema.optional(),
  params: SamplingParamsSchema.optional(),
  system_prefix: z.string().optional(),
  system_suffix: z.string().optional(),
  repair_attempts: z.number().int().min(0).optional(),
  grounding: z.boolean().optional(),
  images: z.array(ModelChoiceSchema).optional(),
  image: z.object({ prompt: z.string(), negative_prompt: z.string().optional(), aspect_ratio: z.string().optional(), seed: z.number().optional() }).optional(),
  /** W3C trace context of the coordinator's agent span. */
  trace: z.record(z.string(), z.string()).optional(),
});
export type AgentTask = z.output<typeof AgentTaskSchema>;

const UsageSchema = z.object({
  input_tokens: z.number(),
  output_tokens: z.number(),
  thinking_tokens: z.number(),
  total_tokens: z.number(),
}) satisfies z.ZodType<Usage>;

/** A provider failure the image chain absorbed by going on to the next provider. */
const FallbackSchema = z.object({
  from: ProviderKindSchema,
  to: ProviderKindSchema,
  /** The failed call's error code, as generation_agent_errors_total counts it. */
  code: z.string(),
});
type Fallback = z.output<typeof FallbackSchema>;

const AgentSuccessSchema = z.object({
  ok: z.literal(true),
  /** Valid by the agent's schema (AgentOutput), which checked it where it ran; plain JSON, as it crosses the agent pool. */
  output: z.unknown().refine((output): boolean => output !== undefined, 'an output is required'),
  provider: ProviderKindSchema,
  model: z.string(),
  usage: UsageSchema,
  attempts: z.number().int(),
  duration_ms: z.number(),
  citations: z.array(z.object({ title: z.string(), url: z.string() }) satisfies z.ZodType<Citation>).optional(),
  warnings: z.array(z.string()),
  fallbacks: z.array(FallbackSchema).optional(),
  /** ImageGen: the image bytes, base64 (or a remote URL). */
  image: z.object({ data: z.string().optional(), url: z.string().optional(), mime_type: z.string() }).optional(),
});
export type AgentSuccess = z.output<typeof AgentSuccessSchema>;

const AgentFailureSchema = z.object({
  ok: z.literal(false),
  error: z.object({ message: z.string(), code: z.string(), provider: ProviderKindSchema.optional(), status: z.number().optional() }),
  usage: UsageSchema,
  duration_ms: z.number(),
  fallbacks: z.array(FallbackSchema).optional(),
});
type AgentFailure = z.output<typeof AgentFailureSchema>;

/** What a task comes to; a pool worker sends it back as JSON, and the coordinator parses it with this schema. */
export const AgentOutcomeSchema = z.discriminatedUnion('ok', [AgentSuccessSchema, AgentFailureSchema]);
export type AgentOutcome = z.output<typeof AgentOutcomeSchema>;

/** Why a value does not fit a schema, in one short line: the first few issues with their paths. */
export const mismatchOf = (error: z.ZodError, limit = 4): string =>
  error.issues
    .slice(0, limit)
    .map((issue) => `${issue.path.join('.') || '(root)'}: ${issue.message}`)
    .join('; ');

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
        lastProblem = mismatchOf(checked.error, 8);
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
