// The conductor's planning loop: model turns, the caps that end it, and the resumption of a paused request.
// Carrying out a turn's calls is dispatch.ts's, running one call carry-out.ts's, the money charging.ts's;
// the types they share are run-types.ts's.
import { type ChatTurn, ProviderError, type ToolSpec } from '@tempora/kit/providers';
import { execute } from './dispatch.ts';
import type { ModelChoice } from './models.ts';
import type { CallRecord, ConductorDeps, PlannedCall, RequestContext, RunOutcome, RunState } from './run-types.ts';
import type { Verbosity } from './settings.ts';
import { toolSpecs } from './tools.ts';

/** Output tokens a model turn may use, by verbosity (and never more than the request has left). */
const TURN_TOKENS: Record<Verbosity, number> = { brief: 400, normal: 1200, detailed: 4000 };

const json = (value: unknown) => JSON.stringify(value);

/** How a run ends, less what every ending carries (its calls, its state, the spend it started from). */
type Ending = Omit<RunOutcome, 'calls' | 'started_total' | 'state' | 'text' | 'declined'> & { text?: string };

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
    const outcome = (rest: Ending): RunOutcome => ({
      text: '',
      ...rest,
      ...(declined ? { declined } : {}),
      calls: calls.sort((a, b) => a.index - b.index),
      started_total,
      state,
    });

    if (state.pending.length > 0) {
      let approved: number | undefined;
      if (decision === 'decline') declined = this.decline(context, state);
      else if (decision === 'confirm') {
        approved = state.pending[0]?.index;
        state.confirmed = true;
      }
      const turn = await execute(this.deps, context, state, state.pending, approved);
      calls.push(...turn.calls);
      if (turn.pause) return outcome({ status: 'paused', pause: turn.pause });
    }

    const specs = toolSpecs(context.tools);
    for (;;) {
      const capped = this.capped(state);
      if (capped) return outcome(capped);
      const turn = await this.turn(context, state, specs);
      if (turn instanceof ProviderError) return outcome({ status: 'stopped', stopped_by: 'model_error', text: turn.message });
      const planned = plan(state, turn);
      if (planned.length === 0) return outcome({ status: 'completed', text: turn.text });
      // A turn that asks for tools when no turn is left to read their answers is not carried out.
      const spent = this.capped(state);
      if (spent) return outcome(spent);
      const executed = await execute(this.deps, context, state, planned);
      calls.push(...executed.calls);
      if (executed.pause) return outcome({ status: 'paused', pause: executed.pause });
    }
  }

  /** The paused call is answered as declined, in the transcript; returns what it would have done. */
  private decline(context: RequestContext, state: RunState): RunOutcome['declined'] {
    const [first] = state.pending.splice(0, 1);
    if (!first) return undefined;
    const tool = context.tools.find((candidate) => candidate.name === first.call.name);
    const parsed = tool?.parse(first.call.arguments, context.settings);
    state.transcript.push({
      role: 'tool',
      tool_call_id: first.call.id,
      name: first.call.name,
      content: json({ declined: true, error: 'the user declined this call; do not make it again in this request' }),
    });
    return { tool: first.call.name, action: tool && parsed?.ok ? tool.describe(parsed.value) : first.call.name };
  }

  /** The cap the request has reached, if any. */
  private capped(state: RunState): Ending | undefined {
    const { caps } = this.deps;
    if (state.steps >= caps.steps) return { status: 'stopped', stopped_by: 'step_cap' };
    if (state.tokens >= caps.tokens) return { status: 'stopped', stopped_by: 'token_cap' };
    return undefined;
  }

  /** One model turn, counted against the caps; a failure of the model is returned, anything else thrown. */
  private async turn(context: RequestContext, state: RunState, specs: ToolSpec[]): Promise<ChatTurn | ProviderError> {
    const { model, caps } = this.deps;
    const began = performance.now();
    try {
      const result = await model.provider.chat({
        model: model.model,
        messages: [{ role: 'system', content: context.system }, ...context.history, ...state.transcript],
        tools: specs,
        params: { max_tokens: Math.max(1, Math.min(TURN_TOKENS[context.settings.verbosity], caps.tokens - state.tokens)), temperature: 0.2 },
        signal: context.signal,
        ...(context.plan ? { plan: context.plan } : {}),
      });
      state.steps += 1;
      state.tokens += result.usage.total_tokens;
      this.deps.observeTurn?.((performance.now() - began) / 1000, result.usage.total_tokens);
      return result;
    } catch (error) {
      if (error instanceof ProviderError) return error;
      throw error;
    }
  }
}

/** The turn's calls, numbered on from the request's last, and the turn itself in the transcript. */
function plan(state: RunState, turn: ChatTurn): PlannedCall[] {
  const planned = turn.tool_calls.map((call, offset) => {
    const index = state.next_index + offset;
    // Made-up ids repeat from turn to turn; the index makes them unique within the request.
    return { index, call: call.synthetic_id ? { ...call, id: `call_${index}` } : call };
  });
  state.next_index += planned.length;
  state.transcript.push({ role: 'assistant', content: turn.text, ...(planned.length ? { tool_calls: planned.map((item) => item.call) } : {}) });
  return planned;
}
