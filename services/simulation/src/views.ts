import { figureEntityId, type TdfRecord, toTdf } from '@tempora/kit/moments';
import type { Template } from './domain/templates.ts';
import type { RunRow, StepRow } from './repository/index.ts';

const iso = (value: Date | string | null) => (value ? new Date(value).toISOString() : null);

export function runView(row: Omit<RunRow, 'plan' | 'state' | 'result' | 'caller' | 'lease_owner' | 'lease_until' | 'attempts'> & Partial<RunRow>) {
  const base = `/api/v1/simulations/${row.id}`;
  return {
    id: row.id,
    status: row.status,
    mode: row.mode,
    fidelity: row.fidelity,
    template: row.template,
    prompt: row.prompt,
    mechanisms: row.mechanisms,
    owner: row.owner,
    progress: {
      steps_done: row.steps_done,
      steps_total: row.steps_total,
      percent: row.steps_total ? Math.round((1000 * row.steps_done) / row.steps_total) / 10 : 0,
    },
    cost: {
      currency: 'USD',
      estimate_usd: row.estimate_micros / 1e6,
      max_usd: row.cap_micros / 1e6,
      actual_usd: row.cost_micros / 1e6,
      calls: row.calls,
      tokens: { input: row.input_tokens, output: row.output_tokens, thinking: row.thinking_tokens },
    },
    budgets: row.budgets.map((entry) => ({ budget: entry.budget, period: entry.period, reserved_usd: entry.amount_micros / 1e6 })),
    partial: row.partial,
    error: row.error,
    cancel_requested: row.cancel_requested,
    created_at: iso(row.created_at)!,
    started_at: iso(row.started_at),
    finished_at: iso(row.finished_at),
    links: { self: base, result: `${base}/result`, events: `${base}/events`, cancel: `${base}/cancel` },
  };
}

export const stepView = (step: StepRow) => ({
  seq: step.seq,
  kind: step.kind,
  label: step.label,
  detail: step.detail,
  cost_usd: step.cost_micros / 1e6,
  at: iso(step.created_at),
});

export function templateSummary(template: Template) {
  return {
    id: template.id,
    title: template.title,
    description: template.description,
    domain: template.domain,
    mode: template.mode,
    tier: template.tier,
    setting: template.setting,
    entities: template.entities.map((entity) => ({ id: entity.id, name: entity.name, role: entity.role, kind: entity.kind, importance: entity.importance })),
    timepoints: template.timepoints.map((timepoint) => ({ label: timepoint.label, time: timepoint.time })),
    mechanisms: template.mechanisms,
    cost_estimate_usd: template.cost_estimate_usd,
  };
}

/**
 * A finished run as a TDF record: the stored result is the payload, hashed with the kit's RFC 8785
 * canonicalisation (as the graph and generation services), so the same run always exports the same hash.
 */
export function runTdf(row: RunRow, serviceVersion: string): TdfRecord {
  const result = row.result ?? {};
  const entities = (result.entities as Array<{ name: string; kind: string }> | undefined) ?? [];
  return toTdf({
    id: `simulation:${row.id}`,
    source: 'tempora-simulation',
    timestamp: iso(row.finished_at ?? row.updated_at)!,
    provenance: {
      service: 'simulation',
      service_version: serviceVersion,
      status: row.status,
      mode: row.mode,
      fidelity: row.fidelity,
      template: row.template,
      mechanisms: row.mechanisms,
      partial: row.partial,
      models: result.models ?? [],
      cost_usd: row.cost_micros / 1e6,
      confidence: (result.confidence as { run?: number } | undefined)?.run ?? null,
    },
    payload: result,
    entity_ids: entities.filter((entity) => entity.kind === 'person').map((entity) => figureEntityId(entity.name)),
  });
}
