import { type Scenario, timepointWeight } from '../plan.ts';
import { resolveTimepoint } from '../timepoint.ts';
import { STATE_VARIABLES } from '../vocabulary.ts';
import { createWorld, round, type TimepointRecord, type World } from '../world.ts';
import type { ModeAlgorithm } from './types.ts';

interface CyclicalState {
  world: World;
  cycles: number;
  phases: Array<{ label: string; time: string; hour: number; present?: string[] }>;
  loop: { from: string; to: string; similarity: number; closes: boolean } | null;
}

function phasesOf(scenario: Scenario): CyclicalState['phases'] {
  const labels = scenario.modes.cyclical?.phases ?? scenario.timepoints.slice(0, 4).map((timepoint) => timepoint.label);
  return labels.map((label, index) => {
    const timepoint = scenario.timepoints[index % scenario.timepoints.length]!;
    return { label, time: timepoint.time, hour: timepoint.hour, ...(timepoint.present ? { present: timepoint.present } : {}) };
  });
}
const cyclesOf = (scenario: Scenario | null) => scenario?.modes.cyclical?.cycles ?? 3;

/** Each cycle runs hotter: the swing of every state and relationship grows with it. */
export const escalation = (cycle: number) => round(Math.min(1, 0.35 + 0.25 * cycle), 2);

const cosine = (a: number[], b: number[]) => {
  const dot = a.reduce((sum, value, index) => sum + value * b[index]!, 0);
  const norm = Math.sqrt(a.reduce((sum, value) => sum + value * value, 0)) * Math.sqrt(b.reduce((sum, value) => sum + value * value, 0));
  return norm ? dot / norm : 0;
};
const vector = (timepoint: TimepointRecord) => timepoint.states.flatMap((state) => STATE_VARIABLES.map((variable) => state.vars[variable]));

/**
 * CYCLICAL: the same phases come round again, cycle after cycle, each escalating the last; the final step
 * closes the loop (the last phase feeds the first again) and names what recurs.
 */
export const cyclical: ModeAlgorithm<CyclicalState> = {
  mode: 'CYCLICAL',
  size(scenario, shape) {
    const phases = scenario ? phasesOf(scenario).length : Math.min(4, shape.timepoints);
    const cycles = cyclesOf(scenario);
    return { steps: cycles * phases + 1, weightedCalls: cycles * phases * timepointWeight(shape) };
  },
  init: (_plan, scenario) => ({ world: createWorld(scenario), cycles: cyclesOf(scenario), phases: phasesOf(scenario), loop: null }),
  async step(index, state, ctx) {
    const timepoints = state.world.timepoints;
    if (index < state.cycles * state.phases.length) {
      const cycle = Math.floor(index / state.phases.length);
      const phase = index % state.phases.length;
      const spec = state.phases[phase]!;
      const record = await resolveTimepoint(
        state.world,
        {
          id: `c${cycle + 1}-p${phase + 1}`,
          index,
          label: spec.label,
          time: `cycle ${cycle + 1}: ${spec.time}`,
          hour: spec.hour,
          present: spec.present,
          follows: timepoints.at(-1)?.id ?? null,
          intensity: escalation(cycle),
          guidance: `Cycle ${cycle + 1} of ${state.cycles}: ${spec.label} comes round again${cycle ? ', harder than the last time' : ''}.`,
          direction: { cycle: cycle + 1, phase: phase + 1, escalation: escalation(cycle) },
        },
        ctx,
      );
      return { kind: 'phase', label: `cycle ${cycle + 1}, ${spec.label}`, detail: { timepoint: record.id, cycle: cycle + 1, phase: phase + 1 } };
    }
    const first = timepoints[0]!;
    const last = timepoints.at(-1)!;
    const similarity = round(cosine(vector(first), vector(last)), 3);
    state.loop = { from: last.id, to: first.id, similarity, closes: true };
    return { kind: 'loop', label: `the loop closes (${last.id} → ${first.id})`, detail: state.loop };
  },
  assemble(state) {
    const timepoints = state.world.timepoints;
    const cycles = Array.from({ length: state.cycles }, (_, cycle) => {
      const own = timepoints.filter((timepoint) => timepoint.direction?.cycle === cycle + 1);
      const tension = own.flatMap((timepoint) => timepoint.relationships.map((pair) => pair.tension));
      return {
        cycle: cycle + 1,
        escalation: escalation(cycle),
        phases: own.map((timepoint) => timepoint.id),
        mean_tension: tension.length ? round(tension.reduce((sum, value) => sum + value, 0) / tension.length) : null,
        events: own.reduce((sum, timepoint) => sum + timepoint.events.length, 0),
      };
    });
    // What recurs: who acts in the same phase in more than one cycle, and the mood it comes back with.
    const recurring = state.phases.flatMap((phase, index) => {
      const occurrences = timepoints.filter((timepoint) => timepoint.direction?.phase === index + 1);
      const actors = new Map<string, string[]>();
      for (const timepoint of occurrences) for (const event of timepoint.events) actors.set(event.actor, [...(actors.get(event.actor) ?? []), timepoint.id]);
      return [...actors.entries()]
        .filter(([, seen]) => seen.length > 1)
        .map(([actor, seen]) => ({ phase: phase.label, element: actor, kind: 'actor', occurrences: seen }));
    });
    return { cycles, recurring_elements: recurring, loop: state.loop };
  },
  worlds: (state) => [{ name: 'main', world: state.world }],
};
