import { timepointWeight } from '../plan.ts';
import { resolveTimepoint } from '../timepoint.ts';
import { createWorld, type World } from '../world.ts';
import type { ModeAlgorithm } from './types.ts';

interface ForwardState {
  world: World;
}

/** FORWARD: one timepoint after another, each resolved from the state the one before left. */
export const forward: ModeAlgorithm<ForwardState> = {
  mode: 'FORWARD',
  size: (_scenario, shape) => ({ steps: shape.timepoints, weightedCalls: shape.timepoints * timepointWeight(shape) }),
  init: (_plan, scenario) => ({ world: createWorld(scenario) }),
  async step(index, state, ctx, scenario) {
    const timepoint = scenario.timepoints[index]!;
    const previous = state.world.timepoints.at(-1);
    const record = await resolveTimepoint(
      state.world,
      {
        id: `t${index + 1}`,
        index,
        label: timepoint.label,
        time: timepoint.time,
        hour: timepoint.hour,
        present: timepoint.present,
        follows: previous?.id ?? null,
        guidance: ctx.plan.prompt ?? undefined,
      },
      ctx,
    );
    return { kind: 'timepoint', label: record.label, detail: { timepoint: record.id, events: record.events.length, dialog_turns: record.dialog.length } };
  },
  assemble(state) {
    return {
      timeline: state.world.timepoints.map((timepoint) => ({
        timepoint: timepoint.id,
        label: timepoint.label,
        time: timepoint.time,
        caused_by: timepoint.follows,
        // The acts of the moment before that this one follows from: what carries the chain forward.
        carried_from: state.world.timepoints.find((earlier) => earlier.id === timepoint.follows)?.events.map((event) => event.id) ?? [],
      })),
    };
  },
  worlds: (state) => [{ name: 'main', world: state.world }],
};
