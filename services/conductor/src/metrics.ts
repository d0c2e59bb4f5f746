import { generationOperation, simulationOperation } from '@tempora/kit/http';
import { Metrics, SeriesHistogram, zeroed } from '@tempora/kit/observability';
import { Counter } from 'prom-client';
import { GRAPH_TOOLS } from './domain/graph-tools.ts';
import { PRESETS } from './domain/platform-tools.ts';
import type { CallRecord } from './domain/run-types.ts';

/** The tools the conductor offers (service.ts, and the graph's read tools): what conductor_tool_calls_total starts with. */
export const CONDUCTOR_TOOLS = [...GRAPH_TOOLS, 'render_scene', 'start_simulation', 'follow_simulation', 'summarize_simulation', 'get_balance'];
/** The ledger operations its paid tools book: a scene by preset, with or without an image, and a run by fidelity. */
const PAID_OPERATIONS = [
  ...PRESETS.flatMap((preset) => [generationOperation(preset, false), generationOperation(preset, true)]),
  ...[1, 2, 3, 4, 5].map(simulationOperation),
];
/** The model providers the conductor can be configured with (domain/models.ts); whichever runs, its series are there. */
const MODEL_PROVIDERS = ['native', 'aggregator', 'offline'];

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
    this.messages = new Counter({
      name: 'conductor_messages_total',
      help: 'Messages answered, by outcome (completed, paused, stopped, failed)',
      labelNames: ['status'],
      registers,
    });
    this.toolCalls = new Counter({
      name: 'conductor_tool_calls_total',
      help: 'Tool calls, by tool and outcome (ok, failed, invalid)',
      labelNames: ['tool', 'status'],
      registers,
    });
    this.toolDuration = new SeriesHistogram({
      name: 'conductor_tool_call_duration_seconds',
      help: 'Duration of tool calls, by tool',
      labelNames: ['tool'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120],
      registers,
    });
    this.creditsCharged = new Counter({
      name: 'conductor_credits_charged_total',
      help: 'Credits charged for paid tool calls, by ledger operation',
      labelNames: ['operation'],
      registers,
    });
    this.creditsRefunded = new Counter({
      name: 'conductor_credits_refunded_total',
      help: 'Credits refunded after a paid tool call failed, by ledger operation',
      labelNames: ['operation'],
      registers,
    });
    this.modelTurns = new SeriesHistogram({
      name: 'conductor_model_turn_duration_seconds',
      help: 'Duration of model turns, by provider',
      labelNames: ['provider'],
      buckets: [0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
      registers,
    });
    this.modelTokens = new Counter({
      name: 'conductor_model_tokens_total',
      help: 'Model tokens used (input and output), by provider',
      labelNames: ['provider'],
      registers,
    });
    // Exported from the start at 0, so a quiet conductor reads as "none" rather than no data.
    zeroed(this.messages, { status: ['completed', 'paused', 'stopped', 'failed'] });
    zeroed(this.toolCalls, { tool: CONDUCTOR_TOOLS, status: ['ok', 'failed', 'invalid'] });
    zeroed(this.toolDuration, { tool: CONDUCTOR_TOOLS });
    zeroed(this.creditsCharged, { operation: PAID_OPERATIONS });
    zeroed(this.creditsRefunded, { operation: PAID_OPERATIONS });
    zeroed(this.modelTurns, { provider: MODEL_PROVIDERS });
    zeroed(this.modelTokens, { provider: MODEL_PROVIDERS });
  }

  observeCall(record: CallRecord, refunded: number): void {
    this.toolCalls.inc({ tool: record.tool, status: record.status });
    if (record.status !== 'invalid') this.toolDuration.series(record.tool).observe(record.duration_ms / 1000);
    if (record.operation && record.credits + refunded > 0) this.creditsCharged.inc({ operation: record.operation }, record.credits + refunded);
    if (record.operation && refunded > 0) this.creditsRefunded.inc({ operation: record.operation }, refunded);
  }
}
