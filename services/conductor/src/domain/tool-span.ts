// One span per tool call the conductor carries out, as OpenTelemetry's GenAI conventions name the execution
// of a tool: `execute_tool {gen_ai.tool.name}`, kind internal. It is the active span while the tool runs, so
// the HTTP client spans of the tool's calls to the platform's services (and so their server spans) are its
// children, and it sits under the request's server span. Like every span of the platform it records no
// arguments or results (gen_ai.tool.call.arguments and .result are opt-in): they hold what the user wrote.
import { SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import type { ToolCall } from '@tempora/kit/providers';
import type { Priced } from './prices.ts';

const tracer = trace.getTracer('tempora-conductor');

/** How a call ended, for its span: the credits given back, and the class of its failure (`error.type`). */
export interface ToolSpanEnd {
  refunded: number;
  failure?: string;
}

/** Runs `run` as the tool call's span; `price` is what the call was charged (none for a free tool). */
export function inToolSpan<T extends { span: ToolSpanEnd }>(call: ToolCall, price: Priced | undefined, run: () => Promise<T>): Promise<T> {
  const attributes = {
    'gen_ai.operation.name': 'execute_tool',
    'gen_ai.tool.name': call.name,
    // A made-up id (the native protocol gives none) is the conductor's own, not the model's.
    ...(call.synthetic_id ? {} : { 'gen_ai.tool.call.id': call.id }),
    'tempora.credits.charged': price?.amount ?? 0,
    ...(price ? { 'tempora.credits.operation': price.operation } : {}),
  };
  return tracer.startActiveSpan(`execute_tool ${call.name}`, { kind: SpanKind.INTERNAL, attributes }, async (span) => {
    try {
      const ended = await run();
      if (ended.span.refunded > 0) span.setAttribute('tempora.credits.refunded', ended.span.refunded);
      if (ended.span.failure) {
        span.setAttribute('error.type', ended.span.failure);
        span.setStatus({ code: SpanStatusCode.ERROR });
      }
      return ended;
    } finally {
      span.end();
    }
  });
}
