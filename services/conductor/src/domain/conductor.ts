// Over 400 lines: the turn loop and the types it shares with its callers; issue 30 moves the types and
// execute() apart.

import type { Logger } from '@tempora/kit/observability';
import { type ChatMessage, type ChatTurn, ProviderError, type ToolCall } from '@tempora/kit/providers';
import { InsufficientCredits, type Ledger } from '../clients/gateway.ts';
import type { ModelChoice } from './models.ts';
import type { PriceBook, Priced } from './prices.ts';
import { type ConductorSettings, type PauseReason, pauseReason, type Verbosity } from './settings.ts';
import { inToolSpan, type ToolSpanEnd } from './tool-span.ts';
import { type ConductorTool, type FollowedJob, type GraphSession, ToolFailure, type ToolOutcome, toolSpecs } from './tools.ts';

/** One tool call of a request, as `tools_called` reports it and the journal keeps it. */
export interface CallRecord {
  index: number;
  tool: string;
  arguments: Record<string, unknown>;
  /** ok; failed (the tool or the charge failed; a charge is refunded); invalid (refused before running: unknown tool, bad arguments, over the per-turn limit). */
  status: 'ok' | 'failed' | 'invalid';
  /** Credits this call cost, net of its refund. */
  credits: number;
  operation: string | null;
  note: string;
  output: Record<string, unknown> | null;
  /** The refund of a failed call could not be booked yet; the conductor retries it in the background. */
  refund_pending: boolean;
  duration_ms: number;
  /** The work a paid call started that outlives it, and where its settlement is (see `JobState`). */
  job?: FollowedJob & { state: JobState };
}

/**
 * to_follow: the gateway has not taken the job yet (the conductor hands it over in the background);
 * following: the gateway follows it and settles the charge when it ends; settled: the journal shows how.
 */
export type JobState = 'to_follow' | 'following' | 'settled';

/** A call of the current model turn not carried out yet, with the index its idempotency key is made of. */
export interface PlannedCall {
  index: number;
  call: ToolCall;
}

/** Where a request stands between model turns: all a paused request needs to resume in another process. */
export interface RunState {
  /** The request's conversation with the model (the user's request first; no system prompt, no history). */
  transcript: ChatMessage[];
  /** Calls of the last turn still to carry out; the first is the one a pause waits on. */
  pending: PlannedCall[];
  next_index: number;
  steps: number;
  tokens: number;
  /** Credits the request has spent so far, net of refunds. */
  running_total: number;
  /** Whether the user has confirmed a paid call in this request (what `ask_once` waits for). */
  confirmed: boolean;
}

export interface Pause {
  index: number;
  tool: string;
  arguments: Record<string, unknown>;
  /** What the call would do, in words. */
  action: string;
  credits: number;
  operation: string;
  reason: PauseReason;
  /** The request's spend before the call. */
  running_total: number;
  ceiling: number;
  /** The balance, when the balance is what is short. */
  available?: number;
}

export type StopReason = 'step_cap' | 'token_cap' | 'model_error';

export interface RunOutcome {
  status: 'completed' | 'paused' | 'stopped';
  /** The model's answer (completed), or why it stopped (model_error). */
  text: string;
  /** The calls carried out in this run, by index. */
  calls: CallRecord[];
  /** Spend of the request before this run. */
  started_total: number;
  pause?: Pause;
  stopped_by?: StopReason;
  /** A paused call the user declined in this run. */
  declined?: { tool: string; action: string };
  state: RunState;
}

/** A paid call about to be charged, as the journal holds it until the call ends. */
export interface ChargingCall {
  index: number;
  tool: string;
  arguments: Record<string, unknown>;
  status: 'charging';
  credits: number;
  operation: string;
}

/**
 * Keeps every call of a request (the conversation's record, and what a follow-up refers back to), and each
 * paid call from before its charge, so that a process that dies mid-call leaves nothing unrefunded. A
 * turn's ended calls are written together when the turn ends (a paid call stays `charging` until then).
 */
export interface CallJournal {
  /** Upserts by (message, index); `key` is a paid call's ledger key (null for a free call). */
  record(entries: Array<{ record: CallRecord | ChargingCall; key: string | null }>): Promise<void>;
  /** The charge was refused (the balance was short): the call was not made. */
  forget(index: number): Promise<void>;
}

/** Everything one request runs with. */
export interface RequestContext {
  messageId: string;
  userId: string;
  requestId: string;
  settings: ConductorSettings;
  tools: ConductorTool[];
  system: string;
  /** Earlier requests of the conversation and their replies. */
  history: ChatMessage[];
  graph: GraphSession;
  journal: CallJournal;
  signal: AbortSignal;
  /** The offline planner, when the model is the offline provider. */
  plan?: (messages: ChatMessage[]) => ChatTurn;
}

export interface Caps {
  /** Model turns per request. */
  steps: number;
  /** Model tokens per request. */
  tokens: number;
  /** Tool calls one turn may make. */
  callsPerTurn: number;
}

export interface ConductorDeps {
  model: ModelChoice;
  ledger: Ledger;
  prices(requestId: string): Promise<PriceBook>;
  caps: Caps;
  logger: Logger;
  /** Observes each tool call (metrics); optional. */
  observe?(record: CallRecord, refunded: number): void;
  /** Observes each model turn (metrics); optional. */
  observeTurn?(seconds: number, tokens: number): void;
}

/** Output tokens a model turn may use, by verbosity (and never more than the request has left). */
export const TURN_TOKENS: Record<Verbosity, number> = { brief: 400, normal: 1200, detailed: 4000 };

/** The ledger key of a request's call: the message id and the call's index (spec: "message id + call index"). */
export const chargeKey = (messageId: string, index: number) => `conductor:${messageId}:${index}`;

/** A call that ended: its record, its ledger key when paid, and the answer the model reads. */
type Ended = { record: CallRecord; key: string | null; content: string };

const REFUND_DELAYS_MS = [0, 200, 1000];
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const json = (value: unknown) => JSON.stringify(value);

/**
 * The conductor's loop: the model chooses tools, the conductor carries them out and answers each, until the
 * model answers in words, a paid call needs the user's word, or a cap ends it. The calls of one turn run in
 * parallel; their charges are decided in the order the model gave them (so a pause is deterministic), each
 * before its call starts, and a failed call is refunded.
 */
export class Conductor {
  private readonly deps: ConductorDeps;

  constructor(deps: ConductorDeps) {
    this.deps = deps;
  }

  get model(): ModelChoice {
    return this.deps.model;
  }

  /** A new request's state: its transcript starts with the request. */
  static initialState(content: string): RunState {
    return { transcript: [{ role: 'user', content }], pending: [], next_index: 0, steps: 0, tokens: 0, running_total: 0, confirmed: false };
  }

  /**
   * Runs a request from `state` until it completes, pauses or stops. With a `decision`, the state is a
   * paused one: `confirm` lets the call it waits on go ahead, `decline` answers that call as declined.
   */
  async run(context: RequestContext, state: RunState, decision?: 'confirm' | 'decline'): Promise<RunOutcome> {
    const started_total = state.running_total;
    const calls: CallRecord[] = [];
    let declined: RunOutcome['declined'];
    const outcome = (rest: Omit<RunOutcome, 'calls' | 'started_total' | 'state' | 'text' | 'declined'> & { text?: string }): RunOutcome => ({
      text: '',
      ...rest,
      ...(declined ? { declined } : {}),
      calls: calls.sort((a, b) => a.index - b.index),
      started_total,
      state,
    });

    if (state.pending.length > 0) {
      let approved: number | undefined;
      if (decision === 'decline') {
        const [first] = state.pending.splice(0, 1);
        if (first) {
          const tool = context.tools.find((candidate) => candidate.name === first.call.name);
          const parsed = tool?.parse(first.call.arguments, context.settings);
          declined = { tool: first.call.name, action: tool && parsed?.ok ? tool.describe(parsed.value) : first.call.name };
          state.transcript.push({
            role: 'tool',
            tool_call_id: first.call.id,
            name: first.call.name,
            content: json({ declined: true, error: 'the user declined this call; do not make it again in this request' }),
          });
        }
      } else if (decision === 'confirm') {
        approved = state.pending[0]?.index;
        state.confirmed = true;
      }
      const turn = await this.execute(context, state, state.pending, approved);
      calls.push(...turn.calls);
      if (turn.pause) return outcome({ status: 'paused', pause: turn.pause });
    }

    const specs = toolSpecs(context.tools);
    const { caps } = this.deps;
    for (;;) {
      if (state.steps >= caps.steps) return outcome({ status: 'stopped', stopped_by: 'step_cap' });
      if (state.tokens >= caps.tokens) return outcome({ status: 'stopped', stopped_by: 'token_cap' });
      let turn: ChatTurn;
      const began = performance.now();
      try {
        const result = await this.deps.model.provider.chat({
          model: this.deps.model.model,
          messages: [{ role: 'system', content: context.system }, ...context.history, ...state.transcript],
          tools: specs,
          params: { max_tokens: Math.max(1, Math.min(TURN_TOKENS[context.settings.verbosity], caps.tokens - state.tokens)), temperature: 0.2 },
          signal: context.signal,
          ...(context.plan ? { plan: context.plan } : {}),
        });
        state.steps += 1;
        state.tokens += result.usage.total_tokens;
        this.deps.observeTurn?.((performance.now() - began) / 1000, result.usage.total_tokens);
        turn = result;
      } catch (error) {
        if (!(error instanceof ProviderError)) throw error;
        return outcome({ status: 'stopped', stopped_by: 'model_error', text: error.message });
      }
      const planned: PlannedCall[] = turn.tool_calls.map((call, offset) => {
        const index = state.next_index + offset;
        // Made-up ids repeat from turn to turn; the index makes them unique within the request.
        return { index, call: call.synthetic_id ? { ...call, id: `call_${index}` } : call };
      });
      state.next_index += planned.length;
      state.transcript.push({ role: 'assistant', content: turn.text, ...(planned.length ? { tool_calls: planned.map((item) => item.call) } : {}) });
      if (planned.length === 0) return outcome({ status: 'completed', text: turn.text });
      // A turn that asks for tools when no turn is left to read their answers is not carried out.
      if (state.steps >= caps.steps) return outcome({ status: 'stopped', stopped_by: 'step_cap' });
      if (state.tokens >= caps.tokens) return outcome({ status: 'stopped', stopped_by: 'token_cap' });
      const executed = await this.execute(context, state, planned);
      calls.push(...executed.calls);
      if (executed.pause) return outcome({ status: 'paused', pause: executed.pause });
    }
  }

  /**
   * Carries out one turn's calls: each is checked and, when paid, priced, weighed against autonomy, the
   * ceiling and the balance, and charged, in order; each then starts at once, so the calls run in parallel.
   * The first that must wait for the user stops the rest (they stay pending). Answers go into the
   * transcript in the turn's order.
   */
  private async execute(context: RequestContext, state: RunState, planned: PlannedCall[], approved?: number): Promise<{ calls: CallRecord[]; pause?: Pause }> {
    const started: Array<{ item: PlannedCall; done: Promise<Ended> }> = [];
    const deferred: PlannedCall[] = [];
    let pause: Pause | undefined;
    let prices: PriceBook | undefined;
    const refusal = (item: PlannedCall, status: 'invalid' | 'failed', error: string, suggestion?: string) => {
      const record: CallRecord = {
        index: item.index,
        tool: item.call.name,
        arguments: item.call.arguments,
        status,
        credits: 0,
        operation: null,
        note: error,
        output: null,
        refund_pending: false,
        duration_ms: 0,
      };
      this.deps.observe?.(record, 0);
      started.push({ item, done: Promise.resolve({ record, key: null, content: json({ error, ...(suggestion ? { suggestion } : {}) }) }) });
    };
    for (const [position, item] of planned.entries()) {
      const { call } = item;
      // Refused even behind a pause, so that what stays pending is always within the limit.
      if (position >= this.deps.caps.callsPerTurn) {
        refusal(
          item,
          'invalid',
          `at most ${this.deps.caps.callsPerTurn} tool calls are carried out per turn; this one was not`,
          'Ask for the rest in the next turn.',
        );
        continue;
      }
      if (pause) {
        deferred.push(item);
        continue;
      }
      const tool = context.tools.find((candidate) => candidate.name === call.name);
      if (!tool) {
        refusal(item, 'invalid', `there is no tool named ${call.name}`, `Use one of: ${context.tools.map((candidate) => candidate.name).join(', ')}.`);
        continue;
      }
      if (call.arguments_error) {
        refusal(item, 'invalid', call.arguments_error, 'Send the arguments as one JSON object.');
        continue;
      }
      const parsed = tool.parse(call.arguments, context.settings);
      if (!parsed.ok) {
        refusal(item, 'invalid', parsed.error, parsed.suggestion);
        continue;
      }
      if (tool.readOnly) {
        started.push({ item, done: this.runTool(context, state, item, tool, parsed.value) });
        continue;
      }
      let price: Priced;
      try {
        prices ??= await this.deps.prices(context.requestId);
        price = tool.price!(parsed.value, prices);
      } catch (error) {
        refusal(item, 'failed', `${call.name} could not be priced: ${(error as Error).message}`);
        continue;
      }
      const effective = parsed.value as Record<string, unknown>;
      const base = {
        index: item.index,
        tool: call.name,
        arguments: effective,
        credits: price.amount,
        operation: price.operation,
        action: tool.describe(parsed.value),
      };
      const reason = pauseReason(context.settings, {
        price: price.amount,
        runningTotal: state.running_total,
        approved: item.index === approved,
        confirmedBefore: state.confirmed,
      });
      if (reason) {
        pause = { ...base, reason, running_total: state.running_total, ceiling: context.settings.spend_ceiling };
        deferred.push(item);
        continue;
      }
      const key = chargeKey(context.messageId, item.index);
      await context.journal.record([
        { record: { index: item.index, tool: call.name, arguments: effective, status: 'charging', credits: price.amount, operation: price.operation }, key },
      ]);
      try {
        await this.deps.ledger.charge(context.userId, price.amount, price.operation, key, context.requestId);
      } catch (error) {
        if (error instanceof InsufficientCredits) {
          await context.journal.forget(item.index);
          pause = { ...base, reason: 'balance', running_total: state.running_total, ceiling: context.settings.spend_ceiling, available: error.available };
          deferred.push(item);
          continue;
        }
        // Whether the gateway booked it is unknown: the refund under the same key settles it either way.
        const refunded = await this.refund(context, key, `the charge could not be confirmed: ${(error as Error).message}`);
        const record: CallRecord = {
          index: item.index,
          tool: call.name,
          arguments: effective,
          status: 'failed',
          credits: 0,
          operation: price.operation,
          note: `not charged and not run: ${(error as Error).message}`,
          output: null,
          refund_pending: !refunded,
          duration_ms: 0,
        };
        started.push({ item, done: Promise.resolve({ record, key, content: json({ error: record.note }) }) });
        continue;
      }
      state.running_total += price.amount;
      started.push({ item, done: this.runTool(context, state, item, tool, parsed.value, { price, key }) });
    }
    const settled = await Promise.all(started.map((entry) => entry.done));
    if (settled.length > 0) await context.journal.record(settled);
    for (const { record, content } of [...settled].sort((a, b) => a.record.index - b.record.index)) {
      const item = planned.find((candidate) => candidate.index === record.index)!;
      state.transcript.push({ role: 'tool', tool_call_id: item.call.id, name: item.call.name, content });
    }
    state.pending = deferred;
    return { calls: settled.map((entry) => entry.record), ...(pause ? { pause } : {}) };
  }

  /** Runs one call, as its `execute_tool` span; a paid one that fails is refunded (its credits come off the running total). */
  private runTool(
    context: RequestContext,
    state: RunState,
    item: PlannedCall,
    tool: ConductorTool,
    value: unknown,
    paid?: { price: Priced; key: string },
  ): Promise<Ended> {
    return inToolSpan(item.call, paid?.price, () => this.carryOut(context, state, item, tool, value, paid));
  }

  private async carryOut(
    context: RequestContext,
    state: RunState,
    item: PlannedCall,
    tool: ConductorTool,
    value: unknown,
    paid?: { price: Priced; key: string },
  ): Promise<Ended & { span: ToolSpanEnd }> {
    const began = performance.now();
    // The arguments as carried out: the model's, with the defaults the tool applied.
    const base = { index: item.index, tool: item.call.name, arguments: value as Record<string, unknown>, operation: paid?.price.operation ?? null };
    let outcome: ToolOutcome;
    try {
      outcome = await tool.run(value, { userId: context.userId, requestId: context.requestId, signal: context.signal, graph: context.graph });
    } catch (error) {
      const message = error instanceof ToolFailure ? error.message : 'the tool failed unexpectedly';
      if (!(error instanceof ToolFailure))
        this.deps.logger.error({ err: error, tool: item.call.name, requestId: context.requestId }, 'tool failed unexpectedly');
      let refunded = 0;
      let pending = false;
      if (paid) {
        if (await this.refund(context, paid.key, `${item.call.name} failed: ${message}`)) {
          refunded = paid.price.amount;
          state.running_total -= refunded;
        } else pending = true;
      }
      const note = `failed: ${message}${paid ? (pending ? `; the refund of ${paid.price.amount} credits is pending` : `; refunded ${paid.price.amount} credits`) : ''}`;
      const record: CallRecord = {
        ...base,
        status: 'failed',
        credits: (paid?.price.amount ?? 0) - refunded,
        note,
        output: null,
        refund_pending: pending,
        duration_ms: Math.round(performance.now() - began),
      };
      this.deps.observe?.(record, refunded);
      return {
        record,
        key: paid?.key ?? null,
        content: json({ error: message, ...(paid ? { refunded: refunded > 0 } : {}) }),
        span: { refunded, failure: error instanceof ToolFailure ? 'ToolFailure' : '_OTHER' },
      };
    }
    const record: CallRecord = {
      ...base,
      status: 'ok',
      credits: paid?.price.amount ?? 0,
      note: outcome.note,
      output: outcome.output,
      refund_pending: false,
      duration_ms: Math.round(performance.now() - began),
    };
    if (paid && outcome.job) record.job = { ...outcome.job, state: await this.handOver(context, paid.key, outcome.job) };
    this.deps.observe?.(record, 0);
    return { record, key: paid?.key ?? null, content: json(outcome.result), span: { refunded: 0 } };
  }

  /**
   * Hands the job a paid call started to the gateway, which settles its charge when it ends, as it does
   * for the same job started through its proxy; when the gateway cannot take it now, the conductor hands
   * it over later (`to_follow`).
   */
  private async handOver(context: RequestContext, key: string, job: FollowedJob): Promise<JobState> {
    try {
      return (await this.deps.ledger.follow(context.userId, key, job, context.requestId)) ? 'following' : 'settled';
    } catch (error) {
      this.deps.logger.warn({ err: error, key, requestId: context.requestId }, 'the gateway did not take the job yet');
      return 'to_follow';
    }
  }

  /** Refunds the charge under `key`, trying a few times; false when the gateway could not book it (the journal keeps it pending). */
  private async refund(context: RequestContext, key: string, reason: string): Promise<boolean> {
    for (const delay of REFUND_DELAYS_MS) {
      if (delay) await sleep(delay);
      try {
        await this.deps.ledger.refund(context.userId, key, reason, context.requestId);
        return true;
      } catch (error) {
        this.deps.logger.warn({ err: error, key, requestId: context.requestId }, 'refund not booked yet');
      }
    }
    return false;
  }
}
