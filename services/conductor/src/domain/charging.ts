// The money side of a paid call: its charge (journalled before it is booked), the refund of one that
// failed, and the hand-over of the job it started to the gateway, which settles it when the job ends.
import { InsufficientCredits } from '../clients/gateway.ts';
import type { Priced } from './prices.ts';
import type { CallRecord, ConductorDeps, JobState, RequestContext } from './run-types.ts';
import type { FollowedJob } from './tools.ts';

/** The ledger key of a request's call: the message id and the call's index (spec: "message id + call index"). */
export const chargeKey = (messageId: string, index: number) => `conductor:${messageId}:${index}`;

const REFUND_DELAYS_MS = [0, 200, 1000];
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A paid call about to be charged: its index and tool, the arguments as carried out, and its price. */
interface Payable {
  index: number;
  tool: string;
  arguments: Record<string, unknown>;
  price: Priced;
}

/** How a charge went: booked; refused because the balance is short (`available`); or failed, its call recorded as not run. */
type Charged = { booked: true } | { booked: false; available: number } | { booked: false; failed: CallRecord };

/**
 * Charges a paid call under its key, journalled as `charging` first so that a process dying between the
 * charge and the call's end leaves it to be refunded. A refused charge is forgotten (nothing was booked);
 * a charge whose booking is unknown is refunded under the same key, which settles it either way.
 */
export async function charge(deps: ConductorDeps, context: RequestContext, call: Payable, key: string): Promise<Charged> {
  const { price } = call;
  await context.journal.record([
    { record: { index: call.index, tool: call.tool, arguments: call.arguments, status: 'charging', credits: price.amount, operation: price.operation }, key },
  ]);
  try {
    await deps.ledger.charge(context.userId, price.amount, price.operation, key, context.requestId);
    return { booked: true };
  } catch (error) {
    if (error instanceof InsufficientCredits) {
      await context.journal.forget(call.index);
      return { booked: false, available: error.available };
    }
    const refunded = await refund(deps, context, key, `the charge could not be confirmed: ${(error as Error).message}`);
    return {
      booked: false,
      failed: {
        index: call.index,
        tool: call.tool,
        arguments: call.arguments,
        status: 'failed',
        credits: 0,
        operation: price.operation,
        note: `not charged and not run: ${(error as Error).message}`,
        output: null,
        refund_pending: !refunded,
        duration_ms: 0,
      },
    };
  }
}

/** Refunds the charge under `key`, trying a few times; false when the gateway could not book it (the journal keeps it pending). */
export async function refund(deps: ConductorDeps, context: RequestContext, key: string, reason: string): Promise<boolean> {
  for (const delay of REFUND_DELAYS_MS) {
    if (delay) await sleep(delay);
    try {
      await deps.ledger.refund(context.userId, key, reason, context.requestId);
      return true;
    } catch (error) {
      deps.logger.warn({ err: error, key, requestId: context.requestId }, 'refund not booked yet');
    }
  }
  return false;
}

/**
 * Hands the job a paid call started to the gateway, which settles its charge when it ends, as it does
 * for the same job started through its proxy; when the gateway cannot take it now, the conductor hands
 * it over later (`to_follow`).
 */
export async function handOver(deps: ConductorDeps, context: RequestContext, key: string, job: FollowedJob): Promise<JobState> {
  try {
    return (await deps.ledger.follow(context.userId, key, job, context.requestId)) ? 'following' : 'settled';
  } catch (error) {
    deps.logger.warn({ err: error, key, requestId: context.requestId }, 'the gateway did not take the job yet');
    return 'to_follow';
  }
}
