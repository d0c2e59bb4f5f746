/** A run as the simulation service documents it (its OpenAPI `SimulationRun`), queued, five steps to go. */
export function documentedRun(id: string, request: Record<string, unknown>): Record<string, unknown> {
  const self = `/api/v1/simulations/${id}`;
  return {
    id,
    status: 'queued',
    mode: request.mode ?? 'FORWARD',
    fidelity: request.fidelity ?? 3,
    template: request.template ?? null,
    prompt: request.prompt ?? null,
    mechanisms: request.mechanisms ?? [],
    progress: { steps_done: 0, steps_total: 5, percent: 0 },
    cost: { currency: 'USD', estimate_usd: 0.05, max_usd: 0.1, actual_usd: 0, calls: 0, tokens: { input: 0, output: 0, thinking: 0 } },
    budgets: [],
    partial: null,
    error: null,
    cancel_requested: false,
    created_at: new Date().toISOString(),
    started_at: null,
    finished_at: null,
    links: { self, result: `${self}/result`, events: `${self}/events`, cancel: `${self}/cancel` },
  };
}
