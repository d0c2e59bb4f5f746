import type { z } from 'zod';
import type { Decision } from './domain/decision.ts';
import type { ModelChoice } from './domain/models.ts';
import type { RunOutcome } from './domain/run-types.ts';
import type { ConductorSettings } from './domain/settings.ts';
import type { ConductorResponseSchema } from './schemas.ts';

/** The answer to a message, as the route documents it. */
export type ConductorResponse = z.output<typeof ConductorResponseSchema>;

/** The answer to a message: the run's outcome, its reply, its calls with the running total after each, and the pause. */
export function responseOf(
  model: ModelChoice,
  messageId: string,
  conversationId: string,
  outcome: RunOutcome,
  reply: string,
  settings: ConductorSettings,
  decision: Decision | undefined,
  pauseId: string | undefined,
): ConductorResponse {
  let total = outcome.started_total;
  const tools_called = outcome.calls.map((call) => {
    total += call.credits;
    return {
      index: call.index,
      tool: call.tool,
      credits: call.credits,
      running_total: total,
      note: call.note,
      status: call.status,
      arguments: call.arguments,
      output: call.output,
    };
  });
  const { pause } = outcome;
  return {
    message_id: messageId,
    conversation_id: conversationId,
    status: outcome.status,
    reply,
    tools_called,
    spend: {
      credits_total: outcome.state.running_total - outcome.started_total,
      running_total: outcome.state.running_total,
      ceiling: settings.spend_ceiling,
    },
    pending: pause
      ? {
          id: pauseId!,
          index: pause.index,
          tool: pause.tool,
          action: pause.action,
          credits: pause.credits,
          operation: pause.operation,
          reason: pause.reason,
          running_total_after: pause.running_total + pause.credits,
          ceiling: pause.ceiling,
          ...(pause.available === undefined ? {} : { available: pause.available }),
        }
      : null,
    stopped_by: outcome.stopped_by ?? null,
    decision: decision ?? null,
    model: { provider: model.kind, model: model.model, offline: model.kind === 'offline' },
    usage: { steps: outcome.state.steps, tokens: outcome.state.tokens },
  };
}
