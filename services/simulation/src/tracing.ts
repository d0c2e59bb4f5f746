import { context, propagation, type Span, SpanStatusCode, trace } from '@opentelemetry/api';
import { processStoredWork } from '@tempora/kit/observability';

const tracer = trace.getTracer('tempora-simulation');

/** The W3C trace context of the active span (the request creating a run), kept with the run. */
export function activeTraceContext(): Record<string, string> | null {
  const carrier: Record<string, string> = {};
  propagation.inject(context.active(), carrier);
  return carrier.traceparent ? carrier : null;
}

/** What a run's execution ended in: its terminal status, interrupted (shutdown, lost lease) to be resumed, or deleted with its account. */
export type RunEnding = 'completed' | 'stopped' | 'cancelled' | 'failed' | 'interrupted' | 'deleted';

/**
 * One execution of a run by a runner in a `process simulation_runs` span: its steps and their model calls
 * join the trace of the request that created the run. A resumed run adds another such span.
 */
export function traceRun(
  run: { id: string; mode: string; fidelity: number; attempts: number; steps_total: number; trace: Record<string, string> | null },
  execute: () => Promise<RunEnding>,
): Promise<RunEnding> {
  const attributes = {
    'tempora.simulation.mode': run.mode,
    'tempora.simulation.fidelity': run.fidelity,
    'tempora.simulation.attempt': run.attempts,
    'tempora.simulation.steps_total': run.steps_total,
  };
  return processStoredWork('tempora-simulation', { queue: 'simulation_runs', id: run.id, carrier: run.trace, attributes }, async (span) => {
    try {
      const ending = await execute();
      span.setAttribute('tempora.simulation.status', ending);
      if (ending === 'failed') span.setStatus({ code: SpanStatusCode.ERROR, message: 'the run failed' });
      return ending;
    } catch (error) {
      fail(span, error);
      throw error;
    } finally {
      span.end();
    }
  });
}

/**
 * One step of a run, under its process span, the step's model calls (the kit providers' GenAI client spans)
 * beneath it. Its kind (plan, or the mode's own) is an attribute, not part of the name: a step that fails
 * never learns it, and the name stays the same for every step.
 */
export function traceStep<R extends { kind: string }>(step: { index: number; mode: string }, execute: () => Promise<R>, costMicros: () => number): Promise<R> {
  const attributes = { 'tempora.simulation.step': step.index, 'tempora.simulation.mode': step.mode };
  return tracer.startActiveSpan('simulation step', { attributes }, async (span) => {
    try {
      const report = await execute();
      span.setAttribute('tempora.simulation.step.kind', report.kind);
      return report;
    } catch (error) {
      fail(span, error);
      throw error;
    } finally {
      span.setAttribute('tempora.simulation.step.cost_usd', costMicros() / 1e6);
      span.end();
    }
  });
}

function fail(span: Span, error: unknown): void {
  span.setAttribute('error.type', error instanceof Error ? error.constructor.name : '_OTHER');
  span.setStatus({ code: SpanStatusCode.ERROR, message: error instanceof Error ? error.message : String(error) });
}
