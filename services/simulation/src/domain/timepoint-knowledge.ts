import type { Moment } from './timepoint.ts';
import type { Resolved } from './timepoint-entities.ts';
import { type DialogTurn, expose, knownFacts, relationship, round, type TimepointRecord, type World, type WorldEvent } from './world.ts';

type Withheld = NonNullable<TimepointRecord['withheld']>;

/**
 * What each entity learned: its own observation always; the rest only under M3 (public acts witnessed by
 * those on stage, facts told and revealed in dialog). Returns what M19 kept from an entity out of distrust.
 */
export function spreadKnowledge(moment: Moment, resolved: Resolved[], events: WorldEvent[], dialog: DialogTurn[], onStage: string[]): Withheld {
  for (const { entity, reply } of resolved) {
    if (reply?.observation) learnOwn(moment, entity.id, reply.observation);
  }
  const withheld: Withheld = [];
  if (!moment.ctx.has('M3')) return withheld;
  witnessPublicActs(moment, events, onStage);
  const pass = (from: string, to: string, fact: string, channel: 'told' | 'dialog') => passOn(moment, { from, to, fact, channel }, withheld);
  for (const { entity, reply } of resolved) for (const tell of reply?.tells ?? []) pass(entity.id, tell.to, tell.fact, 'told');
  for (const turn of dialog) {
    if (!turn.reveals) continue;
    for (const hearer of turn.to ? [turn.to] : onStage.filter((id) => id !== turn.speaker)) pass(turn.speaker, hearer, turn.reveals, 'dialog');
  }
  return withheld;
}

/** A new fact, first known to the entity it comes from. */
function newFact({ world, spec, ctx }: Moment, entity: string, text: string): string {
  world.counters.facts += 1;
  const id = `${world.prefix}f${world.counters.facts}`;
  world.facts[id] = { id, text, secret: false, origin: { entity, timepoint: spec.id, step: ctx.step } };
  return id;
}

function learnOwn(moment: Moment, entity: string, observation: string): void {
  const fact = newFact(moment, entity, observation);
  expose(moment.world, { entity, fact, channel: 'own', source: null, timepoint: moment.spec.id, step: moment.ctx.step });
}

/** M3: each public act becomes a fact that everyone on stage witnessed (its actor knows it as its own). */
function witnessPublicActs(moment: Moment, events: WorldEvent[], onStage: string[]): void {
  for (const event of events.filter((item) => item.public)) {
    const fact = newFact(moment, event.actor, event.text);
    for (const witness of onStage)
      expose(moment.world, {
        entity: witness,
        fact,
        channel: witness === event.actor ? 'own' : 'witnessed',
        source: witness === event.actor ? null : event.actor,
        timepoint: moment.spec.id,
        step: moment.ctx.step,
      });
  }
}

/** M3: a fact passed from one entity to another; under M19 a secret is withheld from one trusted less than 0.6. */
function passOn({ world, spec, ctx }: Moment, pass: { from: string; to: string; fact: string; channel: 'told' | 'dialog' }, withheld: Withheld): void {
  const { from, to, fact, channel } = pass;
  const pair = relationship(world, from, to);
  if (ctx.has('M19') && world.facts[fact]?.secret && (pair?.trust ?? 0.5) < 0.6) {
    withheld.push({ from, to, fact, reason: `a secret, and ${from} trusts ${to} only ${round(pair?.trust ?? 0.5, 2)}` });
    return;
  }
  expose(world, { entity: to, fact, channel, source: from, timepoint: spec.id, step: ctx.step });
}

/** M19: for each pair on stage, how much each knows that the other does not. */
export function asymmetry(world: World, onStage: string[]): NonNullable<TimepointRecord['asymmetry']> {
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
