import { estimateTokens, extractJson, type ProviderKind, type SamplingParams, type TextProvider } from '@tempora/kit/providers';
import type { z } from 'zod';
import { type Action, costMicros } from './pricing.ts';

/** The providers a process has: native and aggregator when configured, offline always. */
export interface Providers {
  native?: TextProvider;
  aggregator?: TextProvider;
  offline: TextProvider;
}

/** One metered model call, as stored and reported. */
export interface CallRecord {
  step: number;
  action: Action;
  provider: ProviderKind;
  /** The model asked for, as the provider names it. */
  model: string;
  /** The price-table entry it was charged at (the offline provider stands in for this model). */
  priced_as: string;
  input_tokens: number;
  output_tokens: number;
  thinking_tokens: number;
  cost_micros: number;
  duration_ms: number;
}

/** The run has no room left under its maximum for the next call: it stops, its completed steps kept. */
export class RunCapReached extends Error {
  override name = 'RunCapReached';
}

export class ModelReplyError extends Error {
  override name = 'ModelReplyError';
}

/**
 * A run's spending: the most it may spend (its reservation, within every per-run maximum), what its calls
 * have cost, and the ceilings of the calls in flight. A call starts only if its ceiling (prompt tokens in,
 * max_tokens out) still fits, so a run never spends past its maximum.
 */
export class RunMeter {
  readonly capMicros: number;
  spentMicros: number;
  private heldMicros = 0;

  constructor(capMicros: number, spentMicros: number) {
    this.capMicros = capMicros;
    this.spentMicros = spentMicros;
  }

  hold(ceiling: number): void {
    if (this.spentMicros + this.heldMicros + ceiling > this.capMicros) {
      throw new RunCapReached(
        `the next call's ceiling ($${(ceiling / 1e6).toFixed(6)}) does not fit in what the run may still spend ($${((this.capMicros - this.spentMicros - this.heldMicros) / 1e6).toFixed(6)})`,
      );
    }
    this.heldMicros += ceiling;
  }

  settle(ceiling: number, actual: number): void {
    this.heldMicros -= ceiling;
    this.spentMicros += actual;
  }

  /** Whether `ceiling` more would still fit (the check before a step starts). */
  fits(ceiling: number): boolean {
    return this.spentMicros + this.heldMicros + ceiling <= this.capMicros;
  }
}

export interface Ask<S extends z.ZodType> {
  action: Action;
  /** The price-table model this call should use. */
  model: string;
  system: string;
  prompt: string;
  schema: S;
  maxTokens: number;
  /** The offline provider's deterministic answer. */
  offline: () => z.input<S>;
}

/** Where a model of the price table runs: the native provider for bare Gemini names, else the aggregator, else offline. */
export function route(providers: Providers, model: string): { provider: TextProvider; model: string } {
  const bare = !model.includes('/');
  if (bare && providers.native) return { provider: providers.native, model };
  if (providers.aggregator) return { provider: providers.aggregator, model: bare ? `google/${model}` : model };
  return { provider: providers.offline, model: 'offline' };
}

/**
 * A run's door to the models: routes each call, checks its ceiling against the meter, sends the caller's
 * sampling parameters, parses and validates the JSON answer (one more try when it is malformed), meters
 * the tokens at the price table and reports every call. The run's abort signal cancels the call in flight.
 */
export class RunModels {
  private readonly providers: Providers;
  private readonly meter: RunMeter;
  private readonly signal: AbortSignal;
  private readonly params: SamplingParams & { system_prompt_prefix?: string; system_prompt_suffix?: string };
  private readonly record: (call: CallRecord) => void;
  private readonly inFlight = new Set<Promise<unknown>>();
  private stepController = new AbortController();
  step = 0;

  constructor(options: {
    providers: Providers;
    meter: RunMeter;
    signal: AbortSignal;
    params: SamplingParams & { system_prompt_prefix?: string; system_prompt_suffix?: string };
    /** Called as each call answers; the write it starts is the caller's to await before the step is saved. */
    record: (call: CallRecord) => void;
  }) {
    this.providers = options.providers;
    this.meter = options.meter;
    this.signal = options.signal;
    this.params = options.params;
    this.record = options.record;
  }

  /** The ceiling of a call with this prompt at this model. */
  ceiling(model: string, system: string, prompt: string, maxTokens: number): number {
    return costMicros(model, estimateTokens(system + prompt), maxTokens);
  }

  async ask<S extends z.ZodType>(ask: Ask<S>): Promise<{ value: z.output<S>; call: CallRecord }> {
    const call = this.call(ask);
    this.inFlight.add(call);
    try {
      return await call;
    } finally {
      this.inFlight.delete(call);
    }
  }

  /**
   * After a step failed (its run stopped at its maximum, or a call failed): aborts the step's other calls
   * and waits until every one has answered or given up, so none is metered after the run has ended.
   */
  async abandonStep(): Promise<void> {
    this.stepController.abort(new RunCapReached('another call of the step ended it'));
    await Promise.allSettled([...this.inFlight]);
    this.stepController = new AbortController();
  }

  private async call<S extends z.ZodType>(ask: Ask<S>): Promise<{ value: z.output<S>; call: CallRecord }> {
    const signal = AbortSignal.any([this.signal, this.stepController.signal]);
    const { system_prompt_prefix: prefix, system_prompt_suffix: suffix, ...sampling } = this.params;
    const system = [prefix, ask.system, suffix].filter(Boolean).join('\n\n');
    const { provider, model } = route(this.providers, ask.model);
    let lastError: Error | undefined;
    for (let attempt = 0; attempt < 2; attempt += 1) {
      const ceiling = this.ceiling(ask.model, system, ask.prompt, ask.maxTokens);
      this.meter.hold(ceiling);
      const started = performance.now();
      let settled = false;
      try {
        if (signal.aborted) throw signal.reason;
        const result = await provider.generateText({
          model,
          system,
          prompt: ask.prompt,
          json: true,
          params: { temperature: 0.7, ...sampling, max_tokens: ask.maxTokens },
          synthesize: ask.offline,
          signal,
        });
        const actual = costMicros(ask.model, result.usage.input_tokens, result.usage.output_tokens);
        const call: CallRecord = {
          step: this.step,
          action: ask.action,
          provider: result.provider,
          model: result.model,
          priced_as: ask.model,
          input_tokens: result.usage.input_tokens,
          output_tokens: result.usage.output_tokens,
          thinking_tokens: result.usage.thinking_tokens,
          cost_micros: actual,
          duration_ms: Math.round(performance.now() - started),
        };
        this.meter.settle(ceiling, actual);
        settled = true;
        this.record(call);
        let parsed: unknown;
        try {
          parsed = extractJson(result.text);
        } catch {
          lastError = new ModelReplyError(`the ${ask.action} answer is not JSON`);
          continue;
        }
        const checked = ask.schema.safeParse(parsed);
        if (checked.success) return { value: checked.data, call };
        lastError = new ModelReplyError(
          `the ${ask.action} answer does not match: ${checked.error.issues
            .slice(0, 3)
            .map((issue) => `${issue.path.join('.')}: ${issue.message}`)
            .join('; ')}`,
        );
      } catch (error) {
        // A call that failed before answering is not metered (no usage came back).
        if (!settled) this.meter.settle(ceiling, 0);
        if (signal.aborted) throw signal.reason ?? error;
        throw error;
      }
    }
    throw lastError ?? new ModelReplyError(`the ${ask.action} answer could not be used`);
  }
}
