// Carrying out one admitted call: the tool runs as its `execute_tool` span, and a paid call that fails is
// refunded (its credits come off the request's running total).
import { handOver, refund } from './charging.ts';
import type { Priced } from './prices.ts';
import type { CallRecord, ConductorDeps, PlannedCall, RequestContext, RunState } from './run-types.ts';
import { inToolSpan, type ToolSpanEnd } from './tool-span.ts';
import { type ConductorTool, ToolFailure, type ToolOutcome } from './tools.ts';

/** A call that ended: its record, its ledger key when paid, and the answer the model reads. */
export type Ended = { record: CallRecord; key: string | null; content: string };

/** A paid call's price and ledger key. */
export type Paid = { price: Priced; key: string };

/** One call about to run: the run's dependencies and request, the call, its tool and its checked arguments. */
interface Run {
  deps: ConductorDeps;
  context: RequestContext;
  state: RunState;
  item: PlannedCall;
  tool: ConductorTool;
  value: unknown;
  paid?: Paid | undefined;
}

const json = (value: unknown) => JSON.stringify(value);

/** Runs one call, as its `execute_tool` span. */
export function runTool(run: Run): Promise<Ended> {
  return inToolSpan(run.item.call, run.paid?.price, () => carryOut(run));
}

async function carryOut(run: Run): Promise<Ended & { span: ToolSpanEnd }> {
  const { deps, context, tool, value, paid } = run;
  const began = performance.now();
  let outcome: ToolOutcome;
  try {
    outcome = await tool.run(value, { userId: context.userId, requestId: context.requestId, signal: context.signal, graph: context.graph });
  } catch (error) {
    return failed(run, error, began);
  }
  const record: CallRecord = {
    ...recordBase(run),
    status: 'ok',
    credits: paid?.price.amount ?? 0,
    note: outcome.note,
    output: outcome.output,
    refund_pending: false,
    duration_ms: Math.round(performance.now() - began),
  };
  if (paid && outcome.job) record.job = { ...outcome.job, state: await handOver(deps, context, paid.key, outcome.job) };
  deps.observe?.(record, 0);
  return { record, key: paid?.key ?? null, content: json(outcome.result), span: { refunded: 0 } };
}

/** The arguments as carried out: the model's, with the defaults the tool applied. */
const recordBase = ({ item, value, paid }: Run) => ({
  index: item.index,
  tool: item.call.name,
  arguments: value as Record<string, unknown>,
  operation: paid?.price.operation ?? null,
});

/** A call whose tool threw: a ToolFailure is expected (its message goes to the model), anything else is logged; a paid call is refunded. */
async function failed(run: Run, error: unknown, began: number): Promise<Ended & { span: ToolSpanEnd }> {
  const { deps, context, state, item, paid } = run;
  const expected = error instanceof ToolFailure;
  const message = expected ? error.message : 'the tool failed unexpectedly';
  if (!expected) deps.logger.error({ err: error, tool: item.call.name, requestId: context.requestId }, 'tool failed unexpectedly');
  let refunded = 0;
  let pending = false;
  if (paid) {
    if (await refund(deps, context, paid.key, `${item.call.name} failed: ${message}`)) {
      refunded = paid.price.amount;
      state.running_total -= refunded;
    } else pending = true;
  }
  const note = `failed: ${message}${paid ? (pending ? `; the refund of ${paid.price.amount} credits is pending` : `; refunded ${paid.price.amount} credits`) : ''}`;
  const record: CallRecord = {
    ...recordBase(run),
    status: 'failed',
    credits: (paid?.price.amount ?? 0) - refunded,
    note,
    output: null,
    refund_pending: pending,
    duration_ms: Math.round(performance.now() - began),
  };
  deps.observe?.(record, refunded);
  return {
    record,
    key: paid?.key ?? null,
    content: json({ error: message, ...(paid ? { refunded: refunded > 0 } : {}) }),
    span: { refunded, failure: expected ? 'ToolFailure' : '_OTHER' },
  };
}
