import { randomUUID } from 'node:crypto';
import { SpanStatusCode, trace } from '@opentelemetry/api';
import { AGGREGATOR_ONLY_PARAMS, NATIVE_ONLY_PARAMS, addUsage, emptyUsage, type Citation, type ProviderKind, type SamplingParams, type Usage } from '@tempora/kit/providers';
import { EVENT_ORDER, type AgentName, type Brief, type GraphMoment } from '../agents/types.ts';
import type { CharacterRef } from '../agents/shared.ts';
import type { GenerationMetrics } from '../metrics.ts';
import type { Selection } from '../models.ts';
import type { GenerateRequest } from '../schemas.ts';
import type { AgentRunner } from './runners.ts';
import { agentParams, type AgentOutcome, type AgentSuccess, type AgentTask } from './task.ts';

export type StepStatus = 'completed' | 'skipped' | 'failed';

/** One agent call as the scene's timings and the stream report it. */
export interface StepRecord {
  agent: AgentName;
  status: StepStatus;
  provider: ProviderKind | null;
  model: string | null;
  started_ms: number;
  duration_ms: number;
  attempts: number;
  tokens: Usage;
  /** CharacterBio: which character; Dialog/Critique: 2 for the revision round. */
  index?: number;
  note?: string;
}

/** A stream event: one per reported agent, in EVENT_ORDER. */
export interface AgentEvent {
  agent: AgentName;
  status: StepStatus;
  duration_ms: number;
  elapsed_ms: number;
  provider: ProviderKind | null;
  model: string | null;
  tokens: { input: number; output: number; total: number };
  /** When the agent finished (epoch ms); the event may leave later, after the agents before it in the order. */
  completed_at: number;
  output?: unknown;
  warning?: string;
}

export class JudgeRejected extends Error {
  override name = 'JudgeRejected';
}

/** A required agent failed (or the request was cancelled / timed out). */
export class StepFailed extends Error {
  override name = 'StepFailed';
  readonly agent: AgentName | null;
  readonly code: string;
  constructor(agent: AgentName | null, code: string, message: string) {
    super(message);
    this.agent = agent;
    this.code = code;
  }
}

export interface PipelineResult {
  outputs: Record<string, unknown>;
  image: { data?: string; url?: string; mime_type: string; provider: ProviderKind; model: string } | null;
  steps: StepRecord[];
  warnings: string[];
  citations: Citation[];
  usage: Usage;
  total_ms: number;
  dialog_revised: boolean;
}

/** Reports completions in EVENT_ORDER however the dependency graph finishes them. */
class OrderedReporter {
  private readonly ready = new Map<AgentName, AgentEvent>();
  private cursor = 0;
  private readonly emit: ((event: AgentEvent) => void) | undefined;

  constructor(emit: ((event: AgentEvent) => void) | undefined) {
    this.emit = emit;
  }

  complete(event: AgentEvent): void {
    this.ready.set(event.agent, event);
    while (this.cursor < EVENT_ORDER.length) {
      const next = this.ready.get(EVENT_ORDER[this.cursor] as AgentName);
      if (!next) break;
      this.cursor += 1;
      this.emit?.(next);
    }
  }
}

export interface PipelineDeps {
  runner: AgentRunner;
  metrics: GenerationMetrics;
  repairAttempts: number;
  timeoutMs: number;
}

const tracer = trace.getTracer('tempora-generation');

/** llm_params a provider does not take are not sent to it (and the scene says so). */
export function routeParams(params: SamplingParams, provider: ProviderKind): { params: SamplingParams; dropped: string[] } {
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

/**
 * The 14 agents as a dependency graph: each agent starts as soon as its inputs exist (Grounding beside
 * Scene, Moment beside Camera, one CharacterBio per character in parallel, ImagePrompt beside the
 * dialog branch), while events leave in the spec's order.
 */
export async function runPipeline(
  deps: PipelineDeps,
  request: GenerateRequest,
  selection: Selection,
  graphMoment: GraphMoment | null,
  options: { signal?: AbortSignal; onEvent?: (event: AgentEvent) => void } = {},
): Promise<PipelineResult> {
  const controller = new AbortController();
  const onOuterAbort = () => controller.abort(new StepFailed(null, 'cancelled', 'the client went away'));
  if (options.signal?.aborted) onOuterAbort();
  options.signal?.addEventListener('abort', onOuterAbort, { once: true });
  const timer = setTimeout(() => controller.abort(new StepFailed(null, 'timeout', `generation did not finish within ${deps.timeoutMs} ms`)), deps.timeoutMs);
  timer.unref();

  const started = performance.now();
  const wallStart = Date.now();
  const elapsed = () => Math.round(performance.now() - started);
  const steps: StepRecord[] = [];
  const warnings: string[] = [...selection.warnings];
  const citations: Citation[] = [];
  const usage = emptyUsage();
  const reporter = new OrderedReporter(options.onEvent);
  const outputs: Record<string, unknown> = {};
  let failure: StepFailed | JudgeRejected | undefined;
  const llm = request.llm_params;
  const base: Brief = { query: request.query, graph_moment: graphMoment };

  const { dropped } = routeParams(agentParams('Scene', selection.max_tokens, llm), selection.text.provider);
  for (const name of dropped) warnings.push(`llm_params.${name} is not supported by the ${selection.text.provider} provider and was not sent`);

  const fail = (error: StepFailed | JudgeRejected): never => {
    failure ??= error;
    controller.abort(error);
    throw error;
  };

  const event = (agent: AgentName, record: StepRecord | undefined, output?: unknown, warning?: string, status?: StepStatus) =>
    reporter.complete({
      agent,
      status: status ?? record?.status ?? 'skipped',
      duration_ms: record?.duration_ms ?? 0,
      elapsed_ms: elapsed(),
      provider: record?.provider ?? null,
      model: record?.model ?? null,
      tokens: { input: record?.tokens.input_tokens ?? 0, output: record?.tokens.output_tokens ?? 0, total: record?.tokens.total_tokens ?? 0 },
      completed_at: record ? wallStart + record.started_ms + record.duration_ms : Date.now(),
      ...(output !== undefined ? { output } : {}),
      ...(warning ? { warning } : {}),
    });

  async function call(agent: AgentName, brief: Brief, extra: Partial<AgentTask> = {}, index?: number): Promise<{ outcome: AgentOutcome; record: StepRecord }> {
    if (controller.signal.aborted) throw controller.signal.reason;
    const stepStart = elapsed();
    const task: AgentTask = { id: randomUUID(), agent, brief, ...extra };
    if (agent !== 'ImageGen') {
      task.text = selection.text;
      task.params = routeParams(agentParams(agent, selection.max_tokens, llm, selection.temperature), selection.text.provider).params;
      task.system_prefix = llm?.system_prompt_prefix;
      task.system_suffix = llm?.system_prompt_suffix;
      task.repair_attempts = deps.repairAttempts;
      task.grounding = selection.grounding;
    }
    const provider = agent === 'ImageGen' ? (selection.images[0]?.provider ?? 'offline') : selection.text.provider;
    const outcome = await tracer.startActiveSpan(`agent ${agent}`, { attributes: { 'gen_ai.agent.name': agent, 'gen_ai.system': provider, 'gen_ai.request.model': task.text?.model ?? selection.images[0]?.model ?? '' } }, async (span) => {
      try {
        const result = await deps.runner.run(task, controller.signal);
        if (result.ok) {
          span.setAttributes({ 'gen_ai.usage.input_tokens': result.usage.input_tokens, 'gen_ai.usage.output_tokens': result.usage.output_tokens, 'gen_ai.response.model': result.model, 'tempora.attempts': result.attempts });
        } else {
          span.setStatus({ code: SpanStatusCode.ERROR, message: result.error.message });
        }
        return result;
      } finally {
        span.end();
      }
    });
    const used = outcome.ok ? outcome.provider : (outcome.error.provider ?? provider);
    const record: StepRecord = {
      agent,
      status: outcome.ok ? 'completed' : 'failed',
      provider: outcome.ok ? outcome.provider : used,
      model: outcome.ok ? outcome.model : (task.text?.model ?? selection.images[0]?.model ?? null),
      started_ms: stepStart,
      duration_ms: elapsed() - stepStart,
      attempts: outcome.ok ? outcome.attempts : 0,
      tokens: outcome.usage,
      ...(index !== undefined ? { index } : {}),
    };
    steps.push(record);
    addUsage(usage, outcome.usage);
    deps.metrics.agentDuration.observe({ agent, provider: used, status: record.status }, record.duration_ms / 1000);
    deps.metrics.agentTokens.inc({ agent, provider: used, direction: 'input' }, outcome.usage.input_tokens);
    deps.metrics.agentTokens.inc({ agent, provider: used, direction: 'output' }, outcome.usage.output_tokens);
    if (!outcome.ok && outcome.error.code !== 'cancelled') deps.metrics.agentErrors.inc({ agent, provider: used, code: outcome.error.code });
    if (outcome.ok) {
      citations.push(...(outcome.citations ?? []));
      warnings.push(...outcome.warnings.map((warning) => `${agent}: ${warning}`));
    }
    return { outcome, record };
  }

  /** A required agent: its failure fails the request. */
  async function required<O>(agent: AgentName, brief: Brief, extra?: Partial<AgentTask>, index?: number): Promise<{ output: O; record: StepRecord }> {
    const { outcome, record } = await call(agent, brief, extra, index);
    if (!outcome.ok) {
      if (controller.signal.aborted && controller.signal.reason instanceof StepFailed) throw controller.signal.reason;
      return fail(new StepFailed(agent, outcome.error.code, `${agent} failed: ${outcome.error.message}`));
    }
    return { output: outcome.output as O, record };
  }

  /** An optional agent: its failure becomes a warning and a null output. */
  async function optional<O>(agent: AgentName, brief: Brief, extra?: Partial<AgentTask>, index?: number): Promise<{ output: O | null; record: StepRecord; success?: AgentSuccess; warning?: string }> {
    const { outcome, record } = await call(agent, brief, extra, index);
    if (outcome.ok) return { output: outcome.output as O, record, success: outcome };
    if (controller.signal.aborted && controller.signal.reason instanceof StepFailed) throw controller.signal.reason;
    const warning = `${agent} failed and was skipped: ${outcome.error.message}`;
    warnings.push(warning);
    return { output: null, record, warning };
  }

  try {
    const judge = await required<{ valid: boolean; reason: string; normalized_query: string }>('Judge', base);
    if (!judge.output.valid) fail(new JudgeRejected(judge.output.reason || 'the query is not a renderable historical moment'));
    outputs.judge = judge.output;
    event('Judge', judge.record, judge.output);

    const timeline = await required<Record<string, unknown>>('Timeline', { ...base, judge: judge.output });
    outputs.timeline = timeline.output;
    event('Timeline', timeline.record, timeline.output);
    const anchored: Brief = { ...base, timeline: timeline.output };

    const groundingP = (async () => {
      if (!selection.grounding) {
        event('Grounding', undefined, undefined, 'skipped: model_policy permissive');
        return null;
      }
      const result = await optional<Record<string, unknown>>('Grounding', anchored);
      outputs.grounding = result.output;
      event('Grounding', result.record, result.output ?? undefined, result.warning);
      return result.output;
    })();

    const sceneP = required<Record<string, unknown>>('Scene', anchored).then((result) => {
      outputs.scene = result.output;
      event('Scene', result.record, result.output);
      return result.output;
    });

    const charactersP = sceneP.then(async (scene) => {
      const result = await required<{ characters: CharacterRef[] }>('Characters', { ...anchored, scene });
      outputs.characters = result.output;
      event('Characters', result.record, result.output);
      return result.output;
    });

    const biosP = Promise.all([sceneP, charactersP]).then(([scene, characters]) =>
      Promise.all(characters.characters.map((character, index) => required<Record<string, unknown>>('CharacterBio', { ...anchored, scene, character }, {}, index).then((result) => result.output))),
    );

    const graphP = Promise.all([charactersP, biosP]).then(async ([characters, bios]) => {
      outputs.bios = bios;
      const result = await required<Record<string, unknown>>('Graph', { ...anchored, characters, bios });
      outputs.graph = result.output;
      return result.output;
    });

    const momentP = Promise.all([sceneP, charactersP]).then(async ([scene, characters]) => {
      const result = await required<Record<string, unknown>>('Moment', { ...anchored, scene, characters });
      outputs.moment = result.output;
      event('Moment', result.record, result.output);
      return result.output;
    });

    const cameraP = Promise.all([sceneP, charactersP]).then(async ([scene, characters]) => {
      const result = await required<Record<string, unknown>>('Camera', { ...anchored, scene, characters });
      outputs.camera = result.output;
      event('Camera', result.record, result.output);
      return result.output;
    });

    let dialogRevised = false;
    const dialogP = Promise.all([sceneP, charactersP, biosP, graphP, momentP, groundingP]).then(async ([scene, characters, bios, graph, moment, grounding]) => {
      const brief: Brief = { ...anchored, grounding, scene, characters, bios, graph, moment };
      const draft = await required<{ lines: unknown[] }>('Dialog', brief);
      outputs.dialog = draft.output;
      event('Dialog', draft.record, draft.output);

      // Critique may send the dialog back once; the rewrite is critiqued again but never sent back twice.
      const reviewBrief: Brief = { ...anchored, grounding, characters };
      const first = await optional<{ revise: boolean; feedback: string }>('Critique', { ...reviewBrief, dialog: draft.output });
      let critique = first.output;
      let record = first.record;
      if (first.output?.revise) {
        const rewrite = await call('Dialog', { ...brief, previous_dialog: draft.output, revision_feedback: first.output.feedback }, {}, 2);
        if (rewrite.outcome.ok) {
          dialogRevised = true;
          outputs.dialog = rewrite.outcome.output;
          const second = await optional<{ revise: boolean; feedback: string }>('Critique', { ...reviewBrief, dialog: rewrite.outcome.output }, {}, 2);
          if (second.output) critique = { ...second.output, revise: false };
          record = { ...second.record, duration_ms: second.record.started_ms + second.record.duration_ms - first.record.started_ms, started_ms: first.record.started_ms };
        } else if (!controller.signal.aborted) {
          warnings.push(`Dialog rewrite requested by Critique failed; the first draft was kept: ${rewrite.outcome.error.message}`);
        }
      }
      outputs.critique = critique ? { ...critique, revised: dialogRevised } : null;
      event('Critique', record, outputs.critique ?? undefined, first.warning);
    });

    const imagePromptP = Promise.all([sceneP, charactersP, momentP, cameraP]).then(async ([scene, characters, moment, camera]) => {
      const result = await optional<{ prompt: string; negative_prompt: string }>('ImagePrompt', { ...anchored, scene, characters, moment, camera });
      outputs.image_prompt = result.output;
      return result;
    });

    let image: PipelineResult['image'] = null;
    const imageP = imagePromptP.then(async (prompt) => {
      // The reporter holds these events until Critique has been reported; the branch itself does not wait.
      const report = (agent: AgentName, record: StepRecord | undefined, output?: unknown, warning?: string) => event(agent, record, output, warning);
      report('ImagePrompt', prompt.record, prompt.output ?? undefined, prompt.warning);
      if (!request.generate_image) {
        report('Optimizer', undefined, undefined, 'skipped: generate_image is false');
        report('ImageGen', undefined, undefined, 'skipped: generate_image is false');
        return;
      }
      const source = prompt.output ?? { prompt: `${request.query}, photorealistic historical scene`, negative_prompt: '' };
      const optimised = await optional<{ prompt: string; negative_prompt: string; aspect_ratio: string }>('Optimizer', { ...base, image_prompt: source, image_model: selection.images[0]?.model ?? null });
      outputs.optimizer = optimised.output;
      report('Optimizer', optimised.record, optimised.output ?? undefined, optimised.warning);
      const final = optimised.output ?? { ...source, aspect_ratio: '16:9' };
      const generated = await optional<Record<string, unknown>>('ImageGen', base, {
        images: selection.images,
        image: { prompt: final.prompt, negative_prompt: final.negative_prompt, aspect_ratio: final.aspect_ratio, seed: hashSeed(request.query) },
      });
      if (generated.success?.image) {
        image = { ...generated.success.image, provider: generated.success.provider, model: generated.success.model };
      }
      report('ImageGen', generated.record, generated.output ?? undefined, generated.warning);
    });

    const branches = [groundingP, sceneP, charactersP, biosP, graphP, momentP, cameraP, dialogP, imagePromptP, imageP];
    const settled = await Promise.allSettled(branches);
    if (failure) throw failure;
    if (controller.signal.aborted) throw controller.signal.reason;
    const rejected = settled.find((result): result is PromiseRejectedResult => result.status === 'rejected');
    if (rejected) throw rejected.reason;

    return { outputs, image, steps, warnings, citations, usage, total_ms: elapsed(), dialog_revised: dialogRevised };
  } catch (error) {
    if (failure) throw failure;
    if (controller.signal.aborted && controller.signal.reason instanceof StepFailed) throw controller.signal.reason;
    throw error;
  } finally {
    clearTimeout(timer);
    options.signal?.removeEventListener('abort', onOuterAbort);
  }
}

function hashSeed(text: string): number {
  let hash = 2166136261;
  for (const char of text) hash = Math.imul(hash ^ char.charCodeAt(0), 16777619) >>> 0;
  return hash % 4294967295;
}
