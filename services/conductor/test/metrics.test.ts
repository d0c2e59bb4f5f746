import assert from 'node:assert/strict';
import { assertZeroed } from '../../kit/test/metrics-support.ts';
import { GRAPH_TOOLS } from '../src/domain/graph-tools.ts';
import { balanceTool, followSimulationTool, renderTool, startSimulationTool, summarizeSimulationTool } from '../src/domain/platform-tools.ts';
import { CONDUCTOR_TOOLS, ConductorMetrics } from '../src/metrics.ts';

describe('conductor metrics', () => {
  it('starts with the tools the service offers', () => {
    // The factories only keep their client: the names are what service.ts registers.
    const platform = [renderTool, startSimulationTool, followSimulationTool, summarizeSimulationTool, balanceTool].map((tool) => tool(undefined as never).name);
    assert.deepEqual([...CONDUCTOR_TOOLS].sort(), [...GRAPH_TOOLS, ...platform].sort());
  });

  it('exports every series whose labels are known in advance at 0 from the start', async () => {
    const { registry } = new ConductorMetrics();
    const tools = [
      'graph_search',
      'graph_moment',
      'graph_neighbors',
      'traverse_moments',
      'find_path',
      'render_scene',
      'start_simulation',
      'follow_simulation',
      'summarize_simulation',
      'get_balance',
    ];
    await assertZeroed(registry, 'conductor_messages_total', { status: ['completed', 'paused', 'stopped', 'failed'] });
    await assertZeroed(registry, 'conductor_tool_calls_total', { tool: tools, status: ['ok', 'failed', 'invalid'] });
    await assertZeroed(registry, 'conductor_tool_call_duration_seconds', { tool: tools });
    const operations = {
      operation: [
        ...['hyper', 'balanced', 'hd', 'gemini3'].flatMap((preset) => [`generation.${preset}`, `generation.${preset}+image`]),
        ...[1, 2, 3, 4, 5].map((fidelity) => `simulation.fidelity-${fidelity}`),
      ],
    };
    await assertZeroed(registry, 'conductor_credits_charged_total', operations);
    await assertZeroed(registry, 'conductor_credits_refunded_total', operations);
    await assertZeroed(registry, 'conductor_model_turn_duration_seconds', { provider: ['native', 'aggregator', 'offline'] });
    await assertZeroed(registry, 'conductor_model_tokens_total', { provider: ['native', 'aggregator', 'offline'] });
  });
});
