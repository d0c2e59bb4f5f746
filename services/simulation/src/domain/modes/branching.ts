import { timepointWeight } from '../plan.ts';
import { resolveTimepoint } from '../timepoint.ts';
import { STATE_VARIABLES } from '../vocabulary.ts';
import { clone, createWorld, expose, round, type World } from '../world.ts';
import type { ModeAlgorithm } from './types.ts';

interface BranchingState {
  baseline: World;
  counterfactual: World | null;
  branchAt: number;
  comparison: Record<string, unknown> | null;
}

const branchAtOf = (scenario: { modes: { branching?: { branch_at: number } }; timepoints: unknown[] }) =>
  Math.min(scenario.modes.branching?.branch_at ?? Math.floor(scenario.timepoints.length / 2), scenario.timepoints.length - 1);
const interventionOf = (scenario: { modes: { branching?: { intervention: string } }; title: string }) =>
  scenario.modes.branching?.intervention ?? `What if ${scenario.title} had gone the other way?`;

const mean = (values: number[]) => (values.length ? round(values.reduce((sum, value) => sum + value, 0) / values.length) : 0);

function metrics(world: World) {
  const states = Object.values(world.latest);
  return {
    ...Object.fromEntries(STATE_VARIABLES.map((variable) => [`mean_${variable}`, mean(states.map((state) => state.vars[variable]))])),
    mean_trust: mean(world.relationships.map((pair) => pair.trust)),
    mean_tension: mean(world.relationships.map((pair) => pair.tension)),
    events: world.timepoints.reduce((sum, timepoint) => sum + timepoint.events.length, 0),
    exposures: world.exposures.length,
  } as Record<string, number>;
}

/**
 * BRANCHING: the baseline runs to the branch point; there the world is copied, the intervention is made
 * known to every entity of the copy, and from then on each step resolves the same timepoint in both
 * timelines side by side. The last step compares their metrics.
 */
export const branching: ModeAlgorithm<BranchingState> = {
  mode: 'BRANCHING',
  size(scenario, shape) {
    const branchAt = scenario ? branchAtOf(scenario) : Math.floor(shape.timepoints / 2);
    const weight = timepointWeight(shape);
    return { steps: shape.timepoints + 1, weightedCalls: branchAt * weight + (shape.timepoints - branchAt) * 2 * weight };
  },
  init: (_plan, scenario) => ({ baseline: createWorld(scenario), counterfactual: null, branchAt: branchAtOf(scenario), comparison: null }),
  async step(index, state, ctx, scenario) {
    const total = scenario.timepoints.length;
    if (index < total) {
      const timepoint = scenario.timepoints[index]!;
      const spec = { index, label: timepoint.label, time: timepoint.time, hour: timepoint.hour, present: timepoint.present };
      const intervention = interventionOf(scenario);
      if (index === state.branchAt) {
        const copy = clone(state.baseline);
        copy.prefix = 'cf-';
        copy.facts.intervention = {
          id: 'intervention',
          text: intervention,
          secret: false,
          origin: { entity: null, timepoint: `cf-t${index + 1}`, step: ctx.step },
        };
        for (const entity of copy.entities)
          expose(copy, { entity: entity.id, fact: 'intervention', channel: 'witnessed', source: null, timepoint: `cf-t${index + 1}`, step: ctx.step });
        state.counterfactual = copy;
      }
      const baselinePrevious = state.baseline.timepoints.at(-1)?.id ?? null;
      const work = [resolveTimepoint(state.baseline, { ...spec, id: `t${index + 1}`, follows: baselinePrevious, direction: { timeline: 'baseline' } }, ctx)];
      if (state.counterfactual) {
        const counterfactualPrevious = state.counterfactual.timepoints.at(-1)!.id;
        work.push(
          resolveTimepoint(
            state.counterfactual,
            {
              ...spec,
              id: `cf-t${index + 1}`,
              follows: counterfactualPrevious,
              guidance: `Counterfactual: ${intervention}`,
              direction: { timeline: 'counterfactual', intervention },
            },
            ctx,
          ),
        );
      }
      const records = await Promise.all(work);
      return {
        kind: records.length > 1 ? 'branch-timepoint' : 'timepoint',
        label: timepoint.label,
        detail: { timepoints: records.map((record) => record.id) },
      };
    }
    const baseline = metrics(state.baseline);
    const counterfactual = metrics(state.counterfactual!);
    const divergent = state.baseline.entities
      .map((entity) => {
        const a = state.baseline.latest[entity.id];
        const b = state.counterfactual!.latest[entity.id];
        if (!a || !b) return null;
        const distance = round(Math.sqrt(STATE_VARIABLES.reduce((sum, variable) => sum + (a.vars[variable] - b.vars[variable]) ** 2, 0)));
        return { entity: entity.id, distance, baseline_mood: a.mood, counterfactual_mood: b.mood };
      })
      .filter((row): row is NonNullable<typeof row> => row !== null)
      .sort((a, b) => b.distance - a.distance);
    state.comparison = {
      metrics: Object.keys(baseline).map((metric) => ({
        metric,
        baseline: baseline[metric],
        counterfactual: counterfactual[metric],
        delta: round(counterfactual[metric]! - baseline[metric]!),
      })),
      divergent_entities: divergent,
    };
    return { kind: 'comparison', label: 'baseline and counterfactual compared', detail: { metrics: Object.keys(baseline).length } };
  },
  assemble(state, scenario) {
    const branchId = `t${state.branchAt + 1}`;
    return {
      branching: {
        branch_point: { index: state.branchAt, timepoint: branchId, follows: state.baseline.timepoints[state.branchAt - 1]?.id ?? null },
        intervention: interventionOf(scenario),
        baseline: state.baseline.timepoints.map((timepoint) => timepoint.id),
        counterfactual: [
          ...state.baseline.timepoints.slice(0, state.branchAt).map((timepoint) => timepoint.id),
          ...(state.counterfactual?.timepoints.slice(state.branchAt).map((timepoint) => timepoint.id) ?? []),
        ],
        comparison: state.comparison,
      },
    };
  },
  worlds(state) {
    if (!state.counterfactual) return [{ name: 'baseline', world: state.baseline }];
    // The copy repeats the baseline up to the branch point: only its own timepoints are reported for it.
    const own = {
      ...state.counterfactual,
      timepoints: state.counterfactual.timepoints.slice(state.branchAt),
      exposures: state.counterfactual.exposures.filter((exposure) => exposure.timepoint?.startsWith('cf-')),
    };
    return [
      { name: 'baseline', world: state.baseline },
      { name: 'counterfactual', world: own },
    ];
  },
};
