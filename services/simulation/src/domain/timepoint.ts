import { estimateTokens } from '@tempora/kit/providers';
import { dialogViolations, exposureViolations } from './exposure.ts';
import { fidelityOf } from './fidelity.ts';
import { type EntityReply, EntityReplySchema, type SceneReply, SceneReplySchema } from './replies.ts';
import { askValidated, type StepContext } from './step-calls.ts';
import { type EntityContext, synthEntity, synthScene } from './synth.ts';
import { isAnimate, type Mechanism, STATE_VARIABLES } from './vocabulary.ts';
import {
  clamp01,
  type DialogTurn,
  type EntityRecord,
  type EntityState,
  expose,
  knownFacts,
  relationship,
  round,
  type TimepointRecord,
  type World,
  type WorldEvent,
} from './world.ts';

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

const PERSONA = `You simulate one entity of a historical or professional scenario at one moment. Answer with one JSON object only.
Use only the facts listed under "known" (by id): the entity has been exposed to nothing else. Never invent fact ids.`;
const SCENE = `You write what happens between the entities present at one moment of a simulation. Answer with one JSON object only.
A speaker may use or reveal only facts listed as known to that speaker (by id), or revealed to them earlier in this dialog.`;

/** M1 and M2: the resolution an entity gets at this timepoint. */
export function resolutionOf(entity: EntityRecord, appearances: number, fidelity: number, has: (m: Mechanism) => boolean): number {
  let resolution = fidelity;
  if (has('M1')) resolution = Math.max(1, fidelity - (entity.importance === 'principal' ? 0 : entity.importance === 'supporting' ? 1 : 2));
  if (has('M2')) resolution = Math.min(fidelity, resolution + Math.floor(appearances / 2));
  return resolution;
}

/** M14: how active people are at an hour (1 by day, low at night). */
export const circadianActivity = (hour: number) => round(0.55 + 0.45 * Math.cos(((hour - 14) / 24) * 2 * Math.PI), 2);

function others(world: World, entity: string, actors: EntityRecord[]) {
  return actors
    .filter((other) => other.id !== entity)
    .map((other) => {
      const pair = relationship(world, entity, other.id);
      return { id: other.id, name: other.name, trust: pair?.trust ?? 0.5, tension: pair?.tension ?? 0.3 };
    });
}

/** M6: what an entity's context is compressed to: its numbers and its four latest facts. */
function compressedKnown(world: World, facts: string[]) {
  return facts.slice(-4).map((id) => ({ id, text: world.facts[id]!.text }));
}

interface Resolved {
  entity: EntityRecord;
  reply: EntityReply | null;
  resolution: number;
  model?: string;
  asleep: boolean;
  compression?: EntityState['compression'];
}

/**
 * Resolves one timepoint of `world` (mutated): each acting entity through its own model call, all in
 * parallel; then the scene call (atmosphere, dialog, causes, spawned entities) when a mechanism needs it;
 * then exposures, relationships and the other mechanisms' effects, in a fixed order so the result depends
 * on the answers alone.
 */
export async function resolveTimepoint(world: World, spec: TimepointSpec, ctx: StepContext): Promise<TimepointRecord> {
  const { plan } = ctx;
  const has = ctx.has;
  const intensity = spec.intensity ?? 0.5;
  const actors = world.entities.filter((entity) => has('M16') || isAnimate(entity.kind));
  const previous = world.timepoints.at(-1);
  const situation = `${spec.label} (${spec.time})${spec.guidance ? `. ${spec.guidance}` : ''}`;
  const activity = circadianActivity(spec.hour);

  const resolved = await Promise.all(
    actors.map(async (entity): Promise<Resolved> => {
      const appearances = world.latest[entity.id]?.training?.appearances ?? 0;
      const resolution = resolutionOf(entity, appearances, plan.fidelity, has);
      const present = !spec.present || spec.present.includes(entity.id) || Boolean(entity.spawned_at);
      if (has('M5') && !present) return { entity, reply: null, resolution, asleep: false };
      const asleep = has('M14') && activity < 0.35 && entity.kind === 'person' && entity.importance !== 'principal';
      if (asleep) return { entity, reply: null, resolution, asleep: true };

      const facts = knownFacts(world, entity.id);
      const full = facts.map((id) => ({ id, text: world.facts[id]!.text }));
      const known = has('M6') ? compressedKnown(world, facts) : full;
      const context: EntityContext = {
        entity,
        resolution,
        summaryWords: fidelityOf(resolution).summaryWords,
        situation,
        known,
        others: others(world, entity.id, actors),
        asks: { tells: has('M3'), expectations: has('M15') && resolution >= 3, alternative: has('M12'), body: has('M8') },
        intensity,
      };
      const last = world.latest[entity.id];
      const payload = {
        entity: { id: entity.id, name: entity.name, role: entity.role, goals: entity.goals },
        moment: situation,
        state: last ? { mood: last.mood, vars: last.vars, ...(has('M8') && last.body ? { body: last.body } : {}) } : null,
        known,
        others: context.others,
        previously: previous?.events.map((event) => event.text) ?? [],
        answer: {
          resolution,
          fields: fidelityOf(resolution).adds,
          summary_words: context.summaryWords,
          ...(context.asks.tells ? { tells: 'facts you pass on, as {to, fact}' } : {}),
          ...(context.asks.expectations ? { expectations: 'what you expect others to do, as {about, prediction, probability}' } : {}),
          ...(context.asks.alternative ? { alternative: 'the action you considered and did not take, with its probability' } : {}),
          ...(context.asks.body ? { exertion: 'how much the action costs you physically, 0 to 1' } : {}),
        },
      };
      const validIds = new Set(actors.map((actor) => actor.id));
      const { value: reply, model } = await askValidated(
        ctx,
        `entity ${entity.id}`,
        {
          action: 'entity',
          resolution,
          system: PERSONA,
          prompt: JSON.stringify(payload),
          schema: EntityReplySchema,
          offline: (attempt) => synthEntity(plan.seed, spec.id, context, attempt),
        },
        (value) => [
          ...exposureViolations(world, [
            { entity: entity.id, facts: [...value.uses_knowledge, ...value.tells.map((tell) => tell.fact)], where: 'entity answer' },
          ]),
          ...value.tells
            .filter((tell) => !validIds.has(tell.to))
            .map((tell) => ({ entity: entity.id, fact: tell.fact, where: `told to ${tell.to}`, reason: 'unknown fact' as const })),
        ],
      );
      const compression = has('M6')
        ? {
            digest: known.map((fact) => fact.id).join(','),
            full_tokens: estimateTokens(JSON.stringify(full)),
            compressed_tokens: estimateTokens(JSON.stringify(known)),
          }
        : undefined;
      return { entity, reply, resolution, model, asleep: false, ...(compression ? { compression } : {}) };
    }),
  );

  // Entity states and their events, in the actors' order.
  const states: EntityState[] = [];
  const events: WorldEvent[] = [];
  const repairs: NonNullable<TimepointRecord['constraint_repairs']> = [];
  for (const { entity, reply, resolution, model, asleep, compression } of resolved) {
    const last = world.latest[entity.id];
    const base = last?.vars ?? world.start[entity.id] ?? { influence: 0.5, resolve: 0.5, resources: 0.5 };
    const vars = { ...base };
    if (reply) {
      for (const variable of STATE_VARIABLES) {
        const raw = round(base[variable] + (reply.deltas[variable] ?? 0));
        const kept = has('M4') ? clamp01(raw) : raw;
        if (kept !== raw) repairs.push({ entity: entity.id, variable, from: raw, to: kept });
        vars[variable] = kept;
      }
    }
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
    if (has('M8')) {
      const body = last?.body ?? { health: 1, fatigue: 0.2, location: world.entities.length ? spec.label : '' };
      const fatigue = clamp01(body.fatigue + (reply ? reply.exertion * 0.3 : -0.25));
      const health = clamp01(body.health - (fatigue > 0.85 ? 0.1 : 0) - (vars.resources < 0.1 ? 0.1 : 0));
      state.body = { health: round(health), fatigue: round(fatigue), location: reply ? spec.label : body.location };
    }
    if (has('M12') && reply?.alternative) state.alternative = reply.alternative;
    if (has('M15') && reply?.expectations.length) state.expectations = reply.expectations;
    if (compression) state.compression = compression;
    if (has('M14')) state.circadian = { hour: spec.hour, activity, asleep };
    states.push(state);
    if (reply?.action) {
      world.counters.events += 1;
      events.push({
        id: `${world.prefix}e${world.counters.events}`,
        timepoint: spec.id,
        step: ctx.step,
        actor: entity.id,
        text: reply.action,
        public: reply.public_action,
        confidence,
      });
    }
  }

  // The scene: atmosphere (M10), dialog (M11), causes (M7), an entity called in (M9).
  const scene = needsSceneCall(has) ? await sceneCall(world, spec, ctx, resolved, events, intensity) : null;
  const dialog: DialogTurn[] = (scene?.dialog ?? []).map((turn) => ({ ...turn, confidence: round(0.5 + 0.08 * plan.fidelity, 2) }));
  if (has('M7') && scene) {
    for (const event of events) {
      const causes = scene.causes[event.id] ?? [];
      if (causes.length) {
        event.caused_by = causes;
        if (has('M17')) event.modality = causes.length === 1 ? 'necessary' : 'contributing';
      }
    }
  } else if (has('M17') && previous) {
    // Without event-level causes, modal causality still qualifies each act's link to the moment before.
    for (const event of events) event.modality = event.public ? 'sufficient' : 'contributing';
  }

  // What each entity learned: its own observation always; the rest only under M3.
  const withheld: NonNullable<TimepointRecord['withheld']> = [];
  for (const { entity, reply } of resolved) {
    if (!reply?.observation) continue;
    world.counters.facts += 1;
    const id = `${world.prefix}f${world.counters.facts}`;
    world.facts[id] = { id, text: reply.observation, secret: false, origin: { entity: entity.id, timepoint: spec.id, step: ctx.step } };
    expose(world, { entity: entity.id, fact: id, channel: 'own', source: null, timepoint: spec.id, step: ctx.step });
  }
  const onStage = resolved.filter((item) => item.reply).map((item) => item.entity.id);
  if (has('M3')) {
    for (const event of events.filter((item) => item.public)) {
      world.counters.facts += 1;
      const id = `${world.prefix}f${world.counters.facts}`;
      world.facts[id] = { id, text: event.text, secret: false, origin: { entity: event.actor, timepoint: spec.id, step: ctx.step } };
      for (const witness of onStage)
        expose(world, {
          entity: witness,
          fact: id,
          channel: witness === event.actor ? 'own' : 'witnessed',
          source: witness === event.actor ? null : event.actor,
          timepoint: spec.id,
          step: ctx.step,
        });
    }
    const pass = (from: string, to: string, fact: string, channel: 'told' | 'dialog') => {
      const pair = relationship(world, from, to);
      if (has('M19') && world.facts[fact]?.secret && (pair?.trust ?? 0.5) < 0.6) {
        withheld.push({ from, to, fact, reason: `a secret, and ${from} trusts ${to} only ${round(pair?.trust ?? 0.5, 2)}` });
        return;
      }
      expose(world, { entity: to, fact, channel, source: from, timepoint: spec.id, step: ctx.step });
    };
    for (const { entity, reply } of resolved) for (const tell of reply?.tells ?? []) pass(entity.id, tell.to, tell.fact, 'told');
    for (const turn of dialog) {
      if (!turn.reveals) continue;
      for (const hearer of turn.to ? [turn.to] : onStage.filter((id) => id !== turn.speaker)) pass(turn.speaker, hearer, turn.reveals, 'dialog');
    }
  }

  // M13: relationships move with what the entities did towards each other.
  if (has('M13')) {
    for (const { entity, reply } of resolved) {
      if (!reply) continue;
      for (const [other, stance] of Object.entries(reply.stance)) {
        const pair = relationship(world, entity.id, other);
        if (!pair || stance === 'neutral') continue;
        const sign = stance === 'cooperate' ? 1 : -1;
        pair.trust = round(clamp01(pair.trust + 0.06 * sign * (0.5 + intensity)));
        pair.affinity = round(clamp01(pair.affinity + 0.04 * sign));
        pair.tension = round(clamp01(pair.tension - 0.05 * sign * (0.5 + intensity)));
      }
      for (const tell of reply.tells) {
        const pair = relationship(world, entity.id, tell.to);
        if (pair) pair.trust = round(clamp01(pair.trust + 0.02));
      }
    }
  }

  // M9: the entity the scene called for joins from this timepoint on.
  if (has('M9') && scene?.spawn && world.counters.spawned === 0) {
    world.counters.spawned += 1;
    const id = `${world.prefix}spawned-${world.counters.spawned}`;
    world.entities.push({
      id,
      name: scene.spawn.name,
      role: scene.spawn.role,
      kind: 'person',
      importance: 'minor',
      goals: ['carry word faithfully'],
      spawned_at: spec.id,
    });
    for (const event of events.filter((item) => item.public)) {
      const fact = Object.values(world.facts).find((candidate) => candidate.origin.timepoint === spec.id && candidate.text === event.text);
      if (fact) expose(world, { entity: id, fact: fact.id, channel: 'witnessed', source: event.actor, timepoint: spec.id, step: ctx.step });
    }
    for (const other of actors) world.relationships.push({ a: id, b: other.id, trust: 0.5, affinity: 0.5, tension: 0.2 });
  }

  const record: TimepointRecord = {
    id: spec.id,
    index: spec.index,
    label: spec.label,
    time: spec.time,
    hour: spec.hour,
    step: ctx.step,
    follows: spec.follows,
    states,
    events,
    dialog,
    relationships: world.relationships.map((pair) => ({ ...pair })),
    confidence: round(states.reduce((sum, state) => sum + state.confidence, 0) / Math.max(states.length, 1), 3),
  };
  if (spec.direction) record.direction = spec.direction;
  if (has('M4')) record.constraint_repairs = repairs;
  if (has('M10') && scene?.atmosphere) record.atmosphere = scene.atmosphere;
  if (withheld.length) record.withheld = withheld;
  if (has('M19')) record.asymmetry = asymmetry(world, onStage);
  if (has('M15') && previous) record.prospection = prospection(previous, resolved);

  for (const state of states) world.latest[state.entity] = state;
  world.timepoints.push(record);
  return record;
}

const needsSceneCall = (has: (m: Mechanism) => boolean) => has('M7') || has('M9') || has('M10') || has('M11');

async function sceneCall(
  world: World,
  spec: TimepointSpec,
  ctx: StepContext,
  resolved: Resolved[],
  events: WorldEvent[],
  intensity: number,
): Promise<SceneReply> {
  const { plan, has } = ctx;
  const onStage = resolved.filter((item) => item.reply && isAnimate(item.entity.kind));
  const speakers = [...onStage]
    .sort((a, b) => ['principal', 'supporting', 'minor'].indexOf(a.entity.importance) - ['principal', 'supporting', 'minor'].indexOf(b.entity.importance))
    .map((item) => ({ id: item.entity.id, name: item.entity.name, known: knownFacts(world, item.entity.id) }));
  const tension = spec.intensity ?? round(world.relationships.reduce((sum, pair) => sum + pair.tension, 0) / Math.max(world.relationships.length, 1), 2);
  const earlier = world.timepoints.at(-1)?.events ?? [];
  const asks = {
    atmosphere: has('M10'),
    dialog: has('M11'),
    causes: has('M7'),
    spawn: has('M9') && world.counters.spawned === 0 && spec.index === Math.floor((plan.scenario?.timepoints.length ?? 5) / 2),
  };
  const turns = fidelityOf(plan.fidelity).dialogTurns;
  const prompt = JSON.stringify({
    moment: `${spec.label} (${spec.time}), hour ${spec.hour}${spec.guidance ? `. ${spec.guidance}` : ''}`,
    speakers: speakers.map((speaker) => ({ ...speaker, known: speaker.known.map((id) => ({ id, text: world.facts[id]!.text })) })),
    events: events.map((event) => ({ id: event.id, actor: event.actor, text: event.text })),
    earlier_events: earlier.map((event) => ({ id: event.id, actor: event.actor, text: event.text })),
    answer: {
      ...(asks.atmosphere ? { atmosphere: `mood, weather, light, sounds and tension (0–1, aim for ${tension})` } : {}),
      ...(asks.dialog ? { dialog: `${turns} turns of {speaker, to, text, uses_knowledge, reveals}` } : {}),
      ...(asks.causes ? { causes: 'for each event id, the earlier event ids that brought it about' } : {}),
      ...(asks.spawn ? { spawn: 'an entity the moment needs that is not yet present, as {name, role}, or null' } : {}),
    },
  });
  const eventIds = new Set([...events, ...earlier].map((event) => event.id));
  const speakerIds = speakers.map((speaker) => speaker.id);
  const { value } = await askValidated(
    ctx,
    'scene',
    {
      action: 'scene',
      resolution: plan.fidelity,
      system: SCENE,
      prompt,
      schema: SceneReplySchema,
      offline: (attempt) =>
        synthScene(
          plan.seed,
          {
            timepoint: spec.id,
            hour: spec.hour,
            label: spec.label,
            speakers,
            events,
            earlier,
            turns,
            tension: spec.intensity ?? intensity,
            spreads: has('M3'),
            asks,
            factText: (id) => world.facts[id]!.text,
          },
          attempt,
        ),
    },
    (answer) => [
      ...dialogViolations(world, answer.dialog, speakerIds, has('M3')),
      ...answer.dialog
        .filter((turn) => !speakerIds.includes(turn.speaker))
        .map((turn) => ({ entity: turn.speaker, fact: turn.reveals ?? '-', where: 'dialog speaker not on stage', reason: 'not exposed' as const })),
      ...Object.values(answer.causes)
        .flat()
        .filter((id) => !eventIds.has(id))
        .map((id) => ({ entity: 'scene', fact: id, where: 'causes', reason: 'unknown fact' as const })),
    ],
  );
  return value;
}

function asymmetry(world: World, onStage: string[]): NonNullable<TimepointRecord['asymmetry']> {
  const rows: NonNullable<TimepointRecord['asymmetry']> = [];
  for (let i = 0; i < onStage.length; i += 1) {
    for (let j = i + 1; j < onStage.length; j += 1) {
      const a = new Set(knownFacts(world, onStage[i]!));
      const b = new Set(knownFacts(world, onStage[j]!));
      const aOnly = [...a].filter((fact) => !b.has(fact)).length;
      const bOnly = [...b].filter((fact) => !a.has(fact)).length;
      const union = new Set([...a, ...b]).size;
      rows.push({ a: onStage[i]!, b: onStage[j]!, a_only: aOnly, b_only: bOnly, index: round(union ? (aOnly + bOnly) / union : 0, 3) });
    }
  }
  return rows;
}

/** M15: last timepoint's expectations against what the entities expected about did now. */
function prospection(previous: TimepointRecord, resolved: Resolved[]): NonNullable<TimepointRecord['prospection']> {
  const rows: NonNullable<TimepointRecord['prospection']> = [];
  for (const state of previous.states) {
    for (const expectation of state.expectations ?? []) {
      const target = resolved.find((item) => item.entity.id === expectation.about)?.reply;
      if (!target) continue;
      const realised = target.stance[state.entity] === 'oppose' ? 'oppose' : 'cooperate';
      rows.push({ entity: state.entity, about: expectation.about, predicted: expectation.prediction, realised, correct: realised === expectation.prediction });
    }
  }
  return rows;
}
