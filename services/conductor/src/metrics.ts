import { Counter } from 'prom-client';
import { Metrics, SeriesHistogram } from '@tempora/kit/observability';
import type { CallRecord } from './domain/conductor.ts';

/** The conductor's own series, beside the kit's request histogram. */
export class ConductorMetrics extends Metrics {
  readonly messages: Counter<'status'>;
  readonly toolCalls: Counter<'tool' | 'status'>;
  readonly toolDuration: SeriesHistogram<'tool'>;
  readonly creditsCharged: Counter<'operation'>;
  readonly creditsRefunded: Counter<'operation'>;
  readonly modelTurns: SeriesHistogram<'provider'>;
  readonly modelTokens: Counter<'provider'>;

  constructor() {
    super('conductor');
    const registers = [this.registry];
    this.messages = new Counter({ name: 'conductor_messages_total', help: 'Messages answered, by outcome (completed, paused, stopped, failed)', labelNames: ['status'], registers });
    this.toolCalls = new Counter({ name: 'conductor_tool_calls_total', help: 'Tool calls, by tool and outcome (ok, failed, invalid)', labelNames: ['tool', 'status'], registers });
    this.toolDuration = new SeriesHistogram({
      name: 'conductor_tool_call_duration_seconds',
      help: 'Duration of tool calls, by tool',
      labelNames: ['tool'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120],
      registers,
    });
    this.creditsCharged = new Counter({ name: 'conductor_credits_charged_total', help: 'Credits charged for paid tool calls, by ledger operation', labelNames: ['operation'], registers });
    this.creditsRefunded = new Counter({ name: 'conductor_credits_refunded_total', help: 'Credits refunded after a paid tool call failed, by ledger operation', labelNames: ['operation'], registers });
    this.modelTurns = new SeriesHistogram({
      name: 'conductor_model_turn_duration_seconds',
      help: 'Duration of model turns, by provider',
      labelNames: ['provider'],
      buckets: [0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
      registers,
    });
    this.modelTokens = new Counter({ name: 'conductor_model_tokens_total', help: 'Model tokens used (input and output), by provider', labelNames: ['provider'], registers });
  }

  observeCall(record: CallRecord, refunded: number): void {
    this.toolCalls.inc({ tool: record.tool, status: record.status });
    if (record.status !== 'invalid') this.toolDuration.series(record.tool).observe(record.duration_ms / 1000);
    if (record.operation && record.credits + refunded > 0) this.creditsCharged.inc({ operation: record.operation }, record.credits + refunded);
    if (record.operation && refunded > 0) this.creditsRefunded.inc({ operation: record.operation }, refunded);
  }
}
