import { randomUUID } from 'node:crypto';
import { SpanStatusCode, trace } from '@opentelemetry/api';
import { addUsage, type Citation, emptyUsage, GEN_AI_PROVIDER_NAMES, type LlmParams } from '@tempora/kit/providers';
import type { AgentOutput } from '../agents/index.ts';
import type { AgentName, Brief } from '../agents/types.ts';
import type { GenerationMetrics } from '../metrics.ts';
import type { Selection } from '../models.ts';
import { type AgentEvent, OrderedReporter, type StepRecord } from './events.ts';
import { callParams, unsentParamWarnings } from './params.ts';
import type { AgentRunner } from './runner.ts';
import type { AgentOutcome, AgentSuccess, AgentTask } from './task.ts';

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

export interface PipelineDeps {
  runner: AgentRunner;
  metrics: GenerationMetrics;
  repairAttempts: number;
  timeoutMs: number;
}

export interface RunOptions {
  /** Aborted when the client goes away. */
  signal?: AbortSignal;
  onEvent?: (event: AgentEvent) => void;
}

/** What a required agent's call returns (its failure fails the run). */
export interface Step<O> {
  output: O;
  record: StepRecord;
}

/** What an optional agent's call returns: on failure a null output and the warning the scene carries. */
export interface OptionalStep<O> {
  output: O | null;
  record: StepRecord;
  success?: AgentSuccess;
  warning?: string;
}

const tracer = trace.getTracer('tempora-generation');

/**
 * The machinery of one pipeline run, whatever the agent graph (dag.ts) asks of it: cancellation (the
 * client went away, the timeout, a required agent failed), one task per agent call on the runner with its
 * span, metrics and step record, the scene's warnings, citations and token usage, and the events, which
 * leave in the spec's order.
 */
export class PipelineRun {
  readonly steps: StepRecord[] = [];
  readonly warnings: string[];
  readonly citations: Citation[] = [];
  readonly usage = emptyUsage();
  private readonly deps: PipelineDeps;
  private readonly selection: Selection;
  private readonly llm: LlmParams | undefined;
  private readonly controller = new AbortController();
  private readonly reporter: OrderedReporter;
  private readonly started = performance.now();
  private readonly wallStart = Date.now();
  private readonly timer: NodeJS.Timeout;
  private readonly outer: AbortSignal | undefined;
  private failure: StepFailed | JudgeRejected | undefined;

  constructor(deps: PipelineDeps, selection: Selection, llm: LlmParams | undefined, options: RunOptions = {}) {
    this.deps = deps;
    this.selection = selection;
    this.llm = llm;
    this.reporter = new OrderedReporter(options.onEvent);
    this.warnings = [...selection.warnings, ...unsentParamWarnings(selection, llm)];
    this.outer = options.signal;
    if (this.outer?.aborted) this.onOuterAbort();
    this.outer?.addEventListener('abort', this.onOuterAbort, { once: true });
    this.timer = setTimeout(
      () => this.controller.abort(new StepFailed(null, 'timeout', `generation did not finish within ${deps.timeoutMs} ms`)),
      deps.timeoutMs,
    );
    this.timer.unref();
  }

  /** The caller's reason when it gives one (the owner's account was deleted), else the client went away. */
  private readonly onOuterAbort = () =>
    this.controller.abort(this.outer?.reason instanceof StepFailed ? this.outer.reason : new StepFailed(null, 'cancelled', 'the client went away'));

  /** Milliseconds since the run started. */
  elapsed(): number {
    return Math.round(performance.now() - this.started);
  }

  get aborted(): boolean {
    return this.controller.signal.aborted;
  }

  warn(warning: string): void {
    this.warnings.push(warning);
  }

  /** Ends the run with this error: every agent still running is cancelled and none starts. */
  fail(error: StepFailed | JudgeRejected): never {
    this.failure ??= error;
    this.controller.abort(error);
    throw error;
  }

  /** Reports an agent (held until every agent before it in the spec's order has been reported). */
  report(agent: AgentName, step: { record: StepRecord; output?: unknown; warning?: string }): void {
    const { record, output, warning } = step;
    this.reporter.complete({
      agent,
      status: record.status,
      duration_ms: record.duration_ms,
      elapsed_ms: this.elapsed(),
      provider: record.provider,
      model: record.model,
      tokens: { input: record.tokens.input_tokens, output: record.tokens.output_tokens, total: record.tokens.total_tokens },
      completed_at: this.wallStart + record.started_ms + record.duration_ms,
      ...(output !== undefined && output !== null ? { output } : {}),
      ...(warning ? { warning } : {}),
    });
  }

  /** Reports an agent that did not run. */
  skip(agent: AgentName, reason: string): void {
    this.reporter.complete({
      agent,
      status: 'skipped',
      duration_ms: 0,
      elapsed_ms: this.elapsed(),
      provider: null,
      model: null,
      tokens: { input: 0, output: 0, total: 0 },
      completed_at: Date.now(),
      warning: `skipped: ${reason}`,
    });
  }

  /** One agent call on the runner, recorded whatever its outcome. */
  async call(agent: AgentName, brief: Brief, extra: Partial<AgentTask> = {}, index?: number): Promise<{ outcome: AgentOutcome; record: StepRecord }> {
    if (this.controller.signal.aborted) throw this.controller.signal.reason;
    const { selection } = this;
    const stepStart = this.elapsed();
    const task: AgentTask = { id: randomUUID(), agent, brief, ...extra };
    if (agent !== 'ImageGen') {
      Object.assign(task, {
        text: selection.text,
        ...callParams(agent, selection, this.llm),
        repair_attempts: this.deps.repairAttempts,
        grounding: selection.grounding,
      });
    }
    const provider = agent === 'ImageGen' ? (selection.images[0]?.provider ?? 'offline') : selection.text.provider;
    // GenAI's agent span (`invoke_agent {name}`): the model calls under it, in this process or on a pool worker, are the kit providers' spans.
    const attributes = {
      'gen_ai.operation.name': 'invoke_agent',
      'gen_ai.agent.name': agent,
      'gen_ai.provider.name': GEN_AI_PROVIDER_NAMES[provider],
      'gen_ai.system': GEN_AI_PROVIDER_NAMES[provider],
      'tempora.provider.kind': provider,
      'gen_ai.request.model': task.text?.model ?? selection.images[0]?.model ?? '',
    };
    const outcome = await tracer.startActiveSpan(`invoke_agent ${agent}`, { attributes }, async (span) => {
      try {
        const result = await this.deps.runner.run(task, this.controller.signal);
        if (result.ok) {
          span.setAttributes({
            'gen_ai.usage.input_tokens': result.usage.input_tokens,
            'gen_ai.usage.output_tokens': result.usage.output_tokens,
            'gen_ai.response.model': result.model,
            'tempora.attempts': result.attempts,
          });
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
      provider: used,
      model: outcome.ok ? outcome.model : (task.text?.model ?? selection.images[0]?.model ?? null),
      started_ms: stepStart,
      duration_ms: this.elapsed() - stepStart,
      attempts: outcome.ok ? outcome.attempts : 0,
      tokens: outcome.usage,
      ...(index !== undefined ? { index } : {}),
    };
    this.steps.push(record);
    addUsage(this.usage, outcome.usage);
    const { metrics } = this.deps;
    metrics.agentDuration.observe({ agent, provider: used, status: record.status }, record.duration_ms / 1000);
    metrics.agentTokens.inc({ agent, provider: used, direction: 'input' }, outcome.usage.input_tokens);
    metrics.agentTokens.inc({ agent, provider: used, direction: 'output' }, outcome.usage.output_tokens);
    if (!outcome.ok && outcome.error.code !== 'cancelled') metrics.agentErrors.inc({ agent, provider: used, code: outcome.error.code });
    for (const fallback of outcome.fallbacks ?? []) {
      metrics.providerFallbacks.inc({ agent, from: fallback.from, to: fallback.to });
      // Counted against the provider that failed, where TemporaModelProviderFailing reads provider errors.
      metrics.agentErrors.inc({ agent, provider: fallback.from, code: fallback.code });
    }
    if (outcome.ok) {
      this.citations.push(...(outcome.citations ?? []));
      this.warnings.push(...outcome.warnings.map((warning) => `${agent}: ${warning}`));
    }
    return { outcome, record };
  }

  /** A successful call's output, as the agent's schema types it (executeTask validated it, here or on a worker). */
  outputOf<N extends AgentName>(_agent: N, success: AgentSuccess): AgentOutput<N> {
    return success.output as AgentOutput<N>;
  }

  /** A required agent: its failure fails the run. */
  async required<N extends AgentName>(agent: N, brief: Brief, extra?: Partial<AgentTask>, index?: number): Promise<Step<AgentOutput<N>>> {
    const { outcome, record } = await this.call(agent, brief, extra, index);
    if (!outcome.ok) {
      if (this.controller.signal.aborted && this.controller.signal.reason instanceof StepFailed) throw this.controller.signal.reason;
      return this.fail(new StepFailed(agent, outcome.error.code, `${agent} failed: ${outcome.error.message}`));
    }
    return { output: this.outputOf(agent, outcome), record };
  }

  /** An optional agent: its failure becomes a warning and a null output. */
  async optional<N extends AgentName>(agent: N, brief: Brief, extra?: Partial<AgentTask>, index?: number): Promise<OptionalStep<AgentOutput<N>>> {
    const { outcome, record } = await this.call(agent, brief, extra, index);
    if (outcome.ok) return { output: this.outputOf(agent, outcome), record, success: outcome };
    if (this.controller.signal.aborted && this.controller.signal.reason instanceof StepFailed) throw this.controller.signal.reason;
    const warning = `${agent} failed and was skipped: ${outcome.error.message}`;
    this.warnings.push(warning);
    return { output: null, record, warning };
  }

  /** Waits for every branch of the graph; the run's own failure (or cancellation) outranks a branch's error. */
  async settle<T extends readonly unknown[] | []>(branches: T): Promise<{ -readonly [K in keyof T]: Awaited<T[K]> }> {
    const settled = await Promise.allSettled<readonly unknown[]>(branches);
    if (this.failure) throw this.failure;
    if (this.controller.signal.aborted) throw this.controller.signal.reason;
    const rejected = settled.find((result): result is PromiseRejectedResult => result.status === 'rejected');
    if (rejected) throw rejected.reason;
    return settled.map((result) => (result as PromiseFulfilledResult<unknown>).value) as { -readonly [K in keyof T]: Awaited<T[K]> };
  }

  /** The error a run ends with: its failure or cancellation before whatever a branch threw. */
  outcomeOf(error: unknown): unknown {
    if (this.failure) return this.failure;
    if (this.controller.signal.aborted && this.controller.signal.reason instanceof StepFailed) return this.controller.signal.reason;
    return error;
  }

  close(): void {
    clearTimeout(this.timer);
    this.outer?.removeEventListener('abort', this.onOuterAbort);
  }
}
