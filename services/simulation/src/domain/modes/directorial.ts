import { timepointWeight } from '../plan.ts';
import { type DirectorReply, DirectorReplySchema } from '../replies.ts';
import { askValidated } from '../step-calls.ts';
import { randomFor } from '../synth.ts';
import { resolveTimepoint } from '../timepoint.ts';
import { createWorld, round, type World } from '../world.ts';
import type { ModeAlgorithm } from './types.ts';

const ACTS = ['Exposition', 'Rising action', 'Climax', 'Falling action', 'Resolution'];
/** The classic arc the director starts from: low, rising to the climax, falling away. */
const ARC = [0.2, 0.5, 0.9, 0.6, 0.3];

interface DirectorialState {
  world: World;
  acts: DirectorReply['acts'] | null;
  curve: Array<{ timepoint: string; act: number; target: number; realised: number }>;
}

/** Timepoint `index` of `count` belongs to act 1–5, spread evenly across the five. */
export const actOf = (index: number, count: number) => Math.min(4, Math.floor((index * 5) / count));

/**
 * DIRECTORIAL: a director first plans five acts with a tension for each; every timepoint is then resolved
 * under its act's beat with the tension as its intensity (how far states swing, how readily entities
 * oppose each other), and the result compares the target curve with the tension the run realised.
 */
export const directorial: ModeAlgorithm<DirectorialState> = {
  mode: 'DIRECTORIAL',
  size: (_scenario, shape) => ({ steps: shape.timepoints + 1, weightedCalls: 2 + shape.timepoints * timepointWeight(shape) }),
  init: (_plan, scenario) => ({ world: createWorld(scenario), acts: null, curve: [] }),
  async step(index, state, ctx, scenario) {
    if (index === 0) {
      const premise = scenario.modes.directorial?.premise ?? scenario.description;
      const { value } = await askValidated(ctx, 'director', {
        action: 'director',
        resolution: ctx.plan.fidelity,
        system:
          'You are the director of a dramatised historical simulation. Plan exactly five acts (Exposition, Rising action, Climax, Falling action, Resolution), each with a one-sentence beat and a dramatic tension from 0 to 1. Answer with one JSON object only.',
        prompt: JSON.stringify({
          premise,
          moments: scenario.timepoints.map((timepoint) => timepoint.label),
          entities: scenario.entities.map((entity) => entity.name),
        }),
        schema: DirectorReplySchema,
        offline: () => {
          const random = randomFor(ctx.plan.seed, 'director');
          return {
            acts: ACTS.map((name, act) => ({
              name,
              beat: `${name}: ${scenario.timepoints[Math.min(scenario.timepoints.length - 1, Math.round((act * (scenario.timepoints.length - 1)) / 4))]!.label}`,
              tension: round(ARC[act]! + (random() - 0.5) * 0.1, 2),
            })),
          };
        },
      });
      state.acts = value.acts;
      return { kind: 'direction', label: 'five acts planned', detail: { tension: value.acts.map((act) => act.tension) } };
    }
    const position = index - 1;
    const timepoint = scenario.timepoints[position]!;
    const act = actOf(position, scenario.timepoints.length);
    const plannedAct = state.acts![act]!;
    const target = plannedAct.tension;
    const record = await resolveTimepoint(
      state.world,
      {
        id: `t${position + 1}`,
        index: position,
        label: timepoint.label,
        time: timepoint.time,
        hour: timepoint.hour,
        present: timepoint.present,
        follows: state.world.timepoints.at(-1)?.id ?? null,
        intensity: target,
        guidance: `Act ${act + 1}, ${plannedAct.name}: ${plannedAct.beat}. Dramatic tension ${target}.`,
        direction: { act: act + 1, act_name: plannedAct.name, target_tension: target },
      },
      ctx,
    );
    // Realised tension: how strained the relationships are, and how many acts were done in the open.
    const strain = record.relationships.reduce((sum, pair) => sum + pair.tension, 0) / Math.max(record.relationships.length, 1);
    const openness = record.events.length ? record.events.filter((event) => event.public).length / record.events.length : 0;
    const realised = round(0.7 * strain + 0.3 * openness * target, 3);
    state.curve.push({ timepoint: record.id, act: act + 1, target, realised });
    return {
      kind: 'timepoint',
      label: `act ${act + 1}: ${timepoint.label}`,
      detail: { timepoint: record.id, target_tension: target, realised_tension: realised },
    };
  },
  assemble(state) {
    return {
      acts: (state.acts ?? []).map((act, index) => ({
        act: index + 1,
        name: act.name,
        beat: act.beat,
        target_tension: act.tension,
        timepoints: state.curve.filter((point) => point.act === index + 1).map((point) => point.timepoint),
      })),
      tension_curve: state.curve,
    };
  },
  worlds: (state) => [{ name: 'main', world: state.world }],
};
