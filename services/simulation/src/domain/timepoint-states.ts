import type { EntityReply } from './replies.ts';
import type { Moment } from './timepoint.ts';
import type { Resolved } from './timepoint-entities.ts';
import { STATE_VARIABLES } from './vocabulary.ts';
import { clamp01, type EntityRecord, type EntityState, round, type TimepointRecord, type WorldEvent } from './world.ts';

type Repairs = NonNullable<TimepointRecord['constraint_repairs']>;

/** Entity states and their events, in the actors' order (which numbers the events). */
export function entityStates(moment: Moment, resolved: Resolved[]): { states: EntityState[]; events: WorldEvent[]; repairs: Repairs } {
  const states: EntityState[] = [];
  const events: WorldEvent[] = [];
  const repairs: Repairs = [];
  const { world, spec, ctx } = moment;
  for (const item of resolved) {
    const state = entityState(moment, item, repairs);
    states.push(state);
    const { entity, reply } = item;
    if (!reply?.action) continue;
    world.counters.events += 1;
    events.push({
      id: `${world.prefix}e${world.counters.events}`,
      timepoint: spec.id,
      step: ctx.step,
      actor: entity.id,
      text: reply.action,
      public: reply.public_action,
      confidence: state.confidence,
    });
  }
  return { states, events, repairs };
}

function entityState(moment: Moment, { entity, reply, resolution, model, asleep, compression }: Resolved, repairs: Repairs): EntityState {
  const { world, spec, ctx, activity } = moment;
  const { has } = ctx;
  const last = world.latest[entity.id];
  const vars = movedVars(moment, entity, reply, repairs);
  const appearances = (last?.training?.appearances ?? 0) + (reply ? 1 : 0);
  const confidence = round(reply?.confidence ?? clamp01(0.42 + 0.08 * resolution + (has('M2') ? 0.03 * Math.min(appearances, 5) : 0) - (reply ? 0 : 0.2)), 2);
  const state: EntityState = {
    entity: entity.id,
    timepoint: spec.id,
    step: ctx.step,
    resolved: Boolean(reply),
    resolution,
    mood: reply?.mood ?? (asleep ? 'asleep' : (last?.mood ?? 'unseen')),
    summary: reply?.summary ?? (asleep ? `${entity.name} sleeps.` : (last?.summary ?? `${entity.name} is not on stage.`)),
    action: reply?.action ?? null,
    vars,
    uses_knowledge: reply?.uses_knowledge ?? [],
    confidence,
    ...(model ? { model } : {}),
  };
  if (reply?.intention) state.intention = reply.intention;
  if (reply?.reasoning) state.reasoning = reply.reasoning;
  if (reply?.monologue) state.monologue = reply.monologue;
  if (has('M2')) state.training = { appearances, level: Math.min(5, 1 + Math.floor(appearances / 2)) };
  if (has('M8')) state.body = bodyOf(moment, last, reply, vars);
  if (has('M12') && reply?.alternative) state.alternative = reply.alternative;
  if (has('M15') && reply?.expectations.length) state.expectations = reply.expectations;
  if (compression) state.compression = compression;
  if (has('M14')) state.circadian = { hour: spec.hour, activity, asleep };
  return state;
}

/** The state variables moved by the answer's deltas; under M4 kept within 0–1, each repair recorded. */
function movedVars({ world, ctx }: Moment, entity: EntityRecord, reply: EntityReply | null, repairs: Repairs): EntityState['vars'] {
  const base = world.latest[entity.id]?.vars ?? world.start[entity.id] ?? { influence: 0.5, resolve: 0.5, resources: 0.5 };
  const vars = { ...base };
  if (!reply) return vars;
  for (const variable of STATE_VARIABLES) {
    const raw = round(base[variable] + (reply.deltas[variable] ?? 0));
    const kept = ctx.has('M4') ? clamp01(raw) : raw;
    if (kept !== raw) repairs.push({ entity: entity.id, variable, from: raw, to: kept });
    vars[variable] = kept;
  }
  return vars;
}

/** M8: acting tires, resting restores; exhaustion and want cost health. */
function bodyOf({ world, spec }: Moment, last: EntityState | undefined, reply: EntityReply | null, vars: EntityState['vars']): EntityState['body'] {
  const body = last?.body ?? { health: 1, fatigue: 0.2, location: world.entities.length ? spec.label : '' };
  const fatigue = clamp01(body.fatigue + (reply ? reply.exertion * 0.3 : -0.25));
  const health = clamp01(body.health - (fatigue > 0.85 ? 0.1 : 0) - (vars.resources < 0.1 ? 0.1 : 0));
  return { health: round(health), fatigue: round(fatigue), location: reply ? spec.label : body.location };
}
