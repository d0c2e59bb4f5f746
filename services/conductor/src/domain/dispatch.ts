// Carrying out one model turn's calls: each is checked and, when paid, priced, weighed against autonomy,
// the ceiling and the balance, and charged, in the order the model gave them (so a pause is deterministic);
// each then starts at once, so the calls run in parallel.
import { type Ended, type Paid, runTool } from './carry-out.ts';
import { charge, chargeKey } from './charging.ts';
import type { PriceBook, Priced } from './prices.ts';
import type { CallRecord, ConductorDeps, Pause, PlannedCall, RequestContext, RunState } from './run-types.ts';
import { pauseReason } from './settings.ts';
import type { ConductorTool } from './tools.ts';

const json = (value: unknown) => JSON.stringify(value);

/** A call that passed its checks: its tool and its arguments as the tool parsed them. */
interface Admitted {
  item: PlannedCall;
  tool: ConductorTool;
  value: unknown;
}

/**
 * Carries out one turn's calls (`approved`: the index of the call the user just confirmed). The first that
 * must wait for the user stops the rest (they stay pending). Answers go into the transcript in the turn's
 * order.
 */
export async function execute(
  deps: ConductorDeps,
  context: RequestContext,
  state: RunState,
  planned: PlannedCall[],
  approved?: number,
): Promise<{ calls: CallRecord[]; pause?: Pause }> {
  const turn = new Turn(deps, context, state, approved);
  for (const [position, item] of planned.entries()) await turn.dispatch(item, position);
  return turn.finish(planned);
}

/** One turn's calls as they are dispatched: those started (or refused), those deferred behind a pause, and the pause. */
class Turn {
  private readonly deps: ConductorDeps;
  private readonly context: RequestContext;
  private readonly state: RunState;
  private readonly approved: number | undefined;
  private readonly started: Array<{ item: PlannedCall; done: Promise<Ended> }> = [];
  private readonly deferred: PlannedCall[] = [];
  private pause: Pause | undefined;
  /** The gateway's prices, read at the turn's first paid call. */
  private prices: PriceBook | undefined;

  constructor(deps: ConductorDeps, context: RequestContext, state: RunState, approved: number | undefined) {
    this.deps = deps;
    this.context = context;
    this.state = state;
    this.approved = approved;
  }

  async dispatch(item: PlannedCall, position: number): Promise<void> {
    const { callsPerTurn } = this.deps.caps;
    // Refused even behind a pause, so that what stays pending is always within the limit.
    if (position >= callsPerTurn) {
      return this.refuse(
        item,
        'invalid',
        `at most ${callsPerTurn} tool calls are carried out per turn; this one was not`,
        'Ask for the rest in the next turn.',
      );
    }
    if (this.pause) return void this.deferred.push(item);
    const admitted = this.admit(item);
    if (!admitted) return;
    if (admitted.tool.readOnly) return this.start(admitted);
    const price = await this.price(admitted);
    if (price) await this.pay(admitted, price);
  }

  /** The call's tool and parsed arguments; a call naming no tool, or with bad arguments, is refused. */
  private admit(item: PlannedCall): Admitted | undefined {
    const { call } = item;
    const { tools, settings } = this.context;
    const tool = tools.find((candidate) => candidate.name === call.name);
    if (!tool)
      return this.refuse(item, 'invalid', `there is no tool named ${call.name}`, `Use one of: ${tools.map((candidate) => candidate.name).join(', ')}.`);
    if (call.arguments_error) return this.refuse(item, 'invalid', call.arguments_error, 'Send the arguments as one JSON object.');
    const parsed = tool.parse(call.arguments, settings);
    if (!parsed.ok) return this.refuse(item, 'invalid', parsed.error, parsed.suggestion);
    return { item, tool, value: parsed.value };
  }

  /** A paid call's price from the gateway's published costs; a call that cannot be priced is refused. */
  private async price({ item, tool, value }: Admitted): Promise<Priced | undefined> {
    try {
      this.prices ??= await this.deps.prices(this.context.requestId);
      return tool.price!(value, this.prices);
    } catch (error) {
      return this.refuse(item, 'failed', `${item.call.name} could not be priced: ${(error as Error).message}`);
    }
  }

  /** A paid call: paused when the account's settings or the balance say so, else charged and started. */
  private async pay(admitted: Admitted, price: Priced): Promise<void> {
    const { item, tool, value } = admitted;
    const { context, state } = this;
    const effective = value as Record<string, unknown>;
    const reason = pauseReason(context.settings, {
      price: price.amount,
      runningTotal: state.running_total,
      approved: item.index === this.approved,
      confirmedBefore: state.confirmed,
    });
    const pauseFor = (rest: Pick<Pause, 'reason' | 'available'>) => {
      const base = { index: item.index, tool: item.call.name, arguments: effective, credits: price.amount, operation: price.operation };
      this.pause = { ...base, action: tool.describe(value), ...rest, running_total: state.running_total, ceiling: context.settings.spend_ceiling };
      this.deferred.push(item);
    };
    if (reason) return pauseFor({ reason });
    const key = chargeKey(context.messageId, item.index);
    const charged = await charge(this.deps, context, { index: item.index, tool: item.call.name, arguments: effective, price }, key);
    if ('available' in charged) return pauseFor({ reason: 'balance', available: charged.available });
    if ('failed' in charged) {
      this.started.push({ item, done: Promise.resolve({ record: charged.failed, key, content: json({ error: charged.failed.note }) }) });
      return;
    }
    state.running_total += price.amount;
    this.start(admitted, { price, key });
  }

  private start({ item, tool, value }: Admitted, paid?: Paid): void {
    this.started.push({ item, done: runTool({ deps: this.deps, context: this.context, state: this.state, item, tool, value, paid }) });
  }

  /** A call answered with an error (and how to fix it) without running; observed, and recorded with the turn. */
  private refuse(item: PlannedCall, status: 'invalid' | 'failed', error: string, suggestion?: string): undefined {
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
    this.started.push({ item, done: Promise.resolve({ record, key: null, content: json({ error, ...(suggestion ? { suggestion } : {}) }) }) });
    return undefined;
  }

  /** Waits for the started calls, journals them together, and answers each in the transcript in the turn's order. */
  async finish(planned: PlannedCall[]): Promise<{ calls: CallRecord[]; pause?: Pause }> {
    const settled = await Promise.all(this.started.map((entry) => entry.done));
    if (settled.length > 0) await this.context.journal.record(settled);
    for (const { record, content } of [...settled].sort((a, b) => a.record.index - b.record.index)) {
      const item = planned.find((candidate) => candidate.index === record.index)!;
      this.state.transcript.push({ role: 'tool', tool_call_id: item.call.id, name: item.call.name, content });
    }
    this.state.pending = this.deferred;
    return { calls: settled.map((entry) => entry.record), ...(this.pause ? { pause: this.pause } : {}) };
  }
}
