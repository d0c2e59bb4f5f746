import type { CallRecord } from './domain/model.ts';
import type { RunRow } from './repository/index.ts';

/** The money of a run: estimate, maximum, what its metered calls cost, tokens, and which models answered. */
export function costSection(row: Pick<RunRow, 'estimate_micros' | 'cap_micros'>, calls: CallRecord[]) {
  const byModel = new Map<
    string,
    { provider: string; model: string; priced_as: string; calls: number; input_tokens: number; output_tokens: number; cost_micros: number }
  >();
  let total = 0;
  const tokens = { input: 0, output: 0, thinking: 0, total: 0 };
  for (const call of calls) {
    const key = `${call.provider}|${call.model}|${call.priced_as}`;
    let entry = byModel.get(key);
    if (!entry)
      byModel.set(
        key,
        (entry = { provider: call.provider, model: call.model, priced_as: call.priced_as, calls: 0, input_tokens: 0, output_tokens: 0, cost_micros: 0 }),
      );
    entry.calls += 1;
    entry.input_tokens += call.input_tokens;
    entry.output_tokens += call.output_tokens;
    entry.cost_micros += Number(call.cost_micros);
    total += Number(call.cost_micros);
    tokens.input += call.input_tokens;
    tokens.output += call.output_tokens;
    tokens.thinking += call.thinking_tokens;
  }
  tokens.total = tokens.input + tokens.output;
  return {
    cost: {
      currency: 'USD',
      estimate_usd: row.estimate_micros / 1e6,
      max_usd: row.cap_micros / 1e6,
      actual_usd: total / 1e6,
      calls: calls.length,
      tokens,
      by_model: [...byModel.values()].map(({ cost_micros, ...entry }) => ({ ...entry, cost_usd: cost_micros / 1e6 })),
    },
    models: [...byModel.values()].map((entry) => ({
      provider: entry.provider,
      model: entry.model,
      priced_as: entry.priced_as,
      ...(entry.provider === 'offline'
        ? { offline: true, note: `the deterministic offline provider, standing in for ${entry.priced_as} and metered at its price; no model was called` }
        : { offline: false }),
    })),
  };
}
