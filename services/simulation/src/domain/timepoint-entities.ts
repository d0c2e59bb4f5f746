import { estimateTokens } from '@tempora/kit/providers';
import { type ExposureViolation, exposureViolations } from './exposure.ts';
import { fidelityOf } from './fidelity.ts';
import { type EntityReply, EntityReplySchema } from './replies.ts';
import { askValidated } from './step-calls.ts';
import { type EntityContext, synthEntity } from './synth.ts';
import type { Moment } from './timepoint.ts';
import type { Mechanism } from './vocabulary.ts';
import { type EntityRecord, type EntityState, knownFacts, relationship, type World } from './world.ts';

const PERSONA = `You simulate one entity of a historical or professional scenario at one moment. Answer with one JSON object only.
Use only the facts listed under "known" (by id): the entity has been exposed to nothing else. Never invent fact ids.`;

/** An acting entity's answer at this timepoint, or why it gave none (off stage under M5, asleep under M14). */
export interface Resolved {
  entity: EntityRecord;
  reply: EntityReply | null;
  resolution: number;
  model?: string;
  asleep: boolean;
  compression?: EntityState['compression'];
}

/** M1 and M2: the resolution an entity gets at this timepoint. */
export function resolutionOf(entity: EntityRecord, appearances: number, fidelity: number, has: (m: Mechanism) => boolean): number {
  let resolution = fidelity;
  if (has('M1')) resolution = Math.max(1, fidelity - (entity.importance === 'principal' ? 0 : entity.importance === 'supporting' ? 1 : 2));
  if (has('M2')) resolution = Math.min(fidelity, resolution + Math.floor(appearances / 2));
  return resolution;
}

/** Each acting entity through its own model call, all in parallel; the answers in the actors' order. */
export function resolveEntities(moment: Moment): Promise<Resolved[]> {
  return Promise.all(moment.actors.map((entity) => resolveEntity(moment, entity)));
}

async function resolveEntity(moment: Moment, entity: EntityRecord): Promise<Resolved> {
  const { world, spec, ctx } = moment;
  const { has } = ctx;
  const appearances = world.latest[entity.id]?.training?.appearances ?? 0;
  const resolution = resolutionOf(entity, appearances, ctx.plan.fidelity, has);
  const present = !spec.present || spec.present.includes(entity.id) || Boolean(entity.spawned_at);
  if (has('M5') && !present) return { entity, reply: null, resolution, asleep: false };
  const asleep = has('M14') && moment.activity < 0.35 && entity.kind === 'person' && entity.importance !== 'principal';
  if (asleep) return { entity, reply: null, resolution, asleep: true };

  const facts = knownFacts(world, entity.id);
  const full = facts.map((id) => ({ id, text: world.facts[id]!.text }));
  const known = has('M6') ? compressedKnown(world, facts) : full;
  const context: EntityContext = {
    entity,
    resolution,
    summaryWords: fidelityOf(resolution).summaryWords,
    situation: moment.situation,
    known,
    others: others(world, entity.id, moment.actors),
    asks: { tells: has('M3'), expectations: has('M15') && resolution >= 3, alternative: has('M12'), body: has('M8') },
    intensity: moment.intensity,
  };
  const { value: reply, model } = await askValidated(
    ctx,
    `entity ${entity.id}`,
    {
      action: 'entity',
      resolution,
      system: PERSONA,
      prompt: JSON.stringify(entityPayload(moment, context)),
      schema: EntityReplySchema,
      offline: (attempt) => synthEntity(ctx.plan.seed, spec.id, context, attempt),
    },
    (value) => replyViolations(moment, entity, value),
  );
  const compression = has('M6')
    ? {
        digest: known.map((fact) => fact.id).join(','),
        full_tokens: estimateTokens(JSON.stringify(full)),
        compressed_tokens: estimateTokens(JSON.stringify(known)),
      }
    : undefined;
  return { entity, reply, resolution, model, asleep: false, ...(compression ? { compression } : {}) };
}

/** What the entity's model is asked: who it is, where it stands, what it knows, and the fields its mechanisms add. */
function entityPayload({ world, ctx, previous, situation }: Moment, context: EntityContext) {
  const { entity, resolution, asks } = context;
  const last = world.latest[entity.id];
  return {
    entity: { id: entity.id, name: entity.name, role: entity.role, goals: entity.goals },
    moment: situation,
    state: last ? { mood: last.mood, vars: last.vars, ...(ctx.has('M8') && last.body ? { body: last.body } : {}) } : null,
    known: context.known,
    others: context.others,
    previously: previous?.events.map((event) => event.text) ?? [],
    answer: {
      resolution,
      fields: fidelityOf(resolution).adds,
      summary_words: context.summaryWords,
      ...(asks.tells ? { tells: 'facts you pass on, as {to, fact}' } : {}),
      ...(asks.expectations ? { expectations: 'what you expect others to do, as {about, prediction, probability}' } : {}),
      ...(asks.alternative ? { alternative: 'the action you considered and did not take, with its probability' } : {}),
      ...(asks.body ? { exertion: 'how much the action costs you physically, 0 to 1' } : {}),
    },
  };
}

/** An answer is refused when it uses or tells a fact the entity was not exposed to, or tells one to nobody present. */
function replyViolations({ world, actors }: Moment, entity: EntityRecord, value: EntityReply): ExposureViolation[] {
  const validIds = new Set(actors.map((actor) => actor.id));
  return [
    ...exposureViolations(world, [{ entity: entity.id, facts: [...value.uses_knowledge, ...value.tells.map((tell) => tell.fact)], where: 'entity answer' }]),
    ...value.tells
      .filter((tell) => !validIds.has(tell.to))
      .map((tell) => ({ entity: entity.id, fact: tell.fact, where: `told to ${tell.to}`, reason: 'unknown fact' as const })),
  ];
}

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
