import type { SceneReply } from './replies.ts';
import type { StepContext } from './step-calls.ts';
import { moveRelationships, prospection, spawnCalledEntity } from './timepoint-effects.ts';
import { type Resolved, resolveEntities } from './timepoint-entities.ts';
import { asymmetry, spreadKnowledge } from './timepoint-knowledge.ts';
import { linkCauses, needsSceneCall, sceneCall } from './timepoint-scene.ts';
import { entityStates } from './timepoint-states.ts';
import { isAnimate } from './vocabulary.ts';
import { type DialogTurn, type EntityRecord, round, type TimepointRecord, type World } from './world.ts';

export interface TimepointSpec {
  id: string;
  index: number;
  label: string;
  time: string;
  hour: number;
  present?: string[];
  follows: string | null;
  /** What the mode tells the models about this timepoint (an intervention, an act's beat, a cycle's phase). */
  guidance?: string;
  /** Recorded on the timepoint (tension target, cycle, branch). */
  direction?: Record<string, unknown>;
  /** 0–1: DIRECTORIAL's tension target, CYCLICAL's escalation; scales how far states swing. */
  intensity?: number;
}

/** One timepoint being resolved: what every phase of resolveTimepoint reads. */
export interface Moment {
  /** Mutated by the phases, in resolveTimepoint's order. */
  world: World;
  spec: TimepointSpec;
  ctx: StepContext;
  /** The entities that act (all of them under M16), as they were before an entity was called in. */
  actors: EntityRecord[];
  /** The timepoint before this one, if any. */
  previous: TimepointRecord | undefined;
  /** The moment as the entities are told it. */
  situation: string;
  /** M14: how active people are at the spec's hour. */
  activity: number;
  intensity: number;
}

/** M14: how active people are at an hour (1 by day, low at night). */
export const circadianActivity = (hour: number) => round(0.55 + 0.45 * Math.cos(((hour - 14) / 24) * 2 * Math.PI), 2);

/**
 * Resolves one timepoint of `world` (mutated): each acting entity through its own model call, all in
 * parallel; then the scene call (atmosphere, dialog, causes, spawned entities) when a mechanism needs it;
 * then exposures, relationships and the other mechanisms' effects, in a fixed order so the result depends
 * on the answers alone.
 */
export async function resolveTimepoint(world: World, spec: TimepointSpec, ctx: StepContext): Promise<TimepointRecord> {
  const { has } = ctx;
  const moment: Moment = {
    world,
    spec,
    ctx,
    actors: world.entities.filter((entity) => has('M16') || isAnimate(entity.kind)),
    previous: world.timepoints.at(-1),
    situation: `${spec.label} (${spec.time})${spec.guidance ? `. ${spec.guidance}` : ''}`,
    activity: circadianActivity(spec.hour),
    intensity: spec.intensity ?? 0.5,
  };

  const resolved = await resolveEntities(moment);
  const { states, events, repairs } = entityStates(moment, resolved);

  // The scene: atmosphere (M10), dialog (M11), causes (M7), an entity called in (M9).
  const scene = needsSceneCall(has) ? await sceneCall(moment, resolved, events) : null;
  const dialog: DialogTurn[] = (scene?.dialog ?? []).map((turn) => ({ ...turn, confidence: round(0.5 + 0.08 * ctx.plan.fidelity, 2) }));
  linkCauses(moment, events, scene);

  const onStage = resolved.filter((item) => item.reply).map((item) => item.entity.id);
  const withheld = spreadKnowledge(moment, resolved, events, dialog, onStage);
  if (has('M13')) moveRelationships(moment, resolved);
  if (has('M9') && scene?.spawn && world.counters.spawned === 0) spawnCalledEntity(moment, scene.spawn, events);

  const record = timepointRecord(moment, { states, events, dialog, repairs, withheld, scene, onStage, resolved });
  for (const state of states) world.latest[state.entity] = state;
  world.timepoints.push(record);
  return record;
}

interface Outcome extends Pick<TimepointRecord, 'states' | 'events' | 'dialog'> {
  repairs: NonNullable<TimepointRecord['constraint_repairs']>;
  withheld: NonNullable<TimepointRecord['withheld']>;
  scene: SceneReply | null;
  onStage: string[];
  resolved: Resolved[];
}

/** The timepoint as recorded, with what each mechanism adds to it. */
function timepointRecord({ world, spec, ctx, previous }: Moment, outcome: Outcome): TimepointRecord {
  const { has } = ctx;
  const { states, scene } = outcome;
  const record: TimepointRecord = {
    id: spec.id,
    index: spec.index,
    label: spec.label,
    time: spec.time,
    hour: spec.hour,
    step: ctx.step,
    follows: spec.follows,
    states,
    events: outcome.events,
    dialog: outcome.dialog,
    relationships: world.relationships.map((pair) => ({ ...pair })),
    confidence: round(states.reduce((sum, state) => sum + state.confidence, 0) / Math.max(states.length, 1), 3),
  };
  if (spec.direction) record.direction = spec.direction;
  if (has('M4')) record.constraint_repairs = outcome.repairs;
  if (has('M10') && scene?.atmosphere) record.atmosphere = scene.atmosphere;
  if (outcome.withheld.length) record.withheld = outcome.withheld;
  if (has('M19')) record.asymmetry = asymmetry(world, outcome.onStage);
  if (has('M15') && previous) record.prospection = prospection(previous, outcome.resolved);
  return record;
}
