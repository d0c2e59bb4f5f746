import type { SceneReply } from './replies.ts';
import type { Moment } from './timepoint.ts';
import type { Resolved } from './timepoint-entities.ts';
import { clamp01, expose, relationship, round, type TimepointRecord, type WorldEvent } from './world.ts';

/** M13: relationships move with what the entities did towards each other. */
export function moveRelationships({ world, intensity }: Moment, resolved: Resolved[]): void {
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

/** M9: the entity the scene called for joins from this timepoint on, a witness of its public acts. */
export function spawnCalledEntity({ world, spec, ctx, actors }: Moment, spawn: NonNullable<SceneReply['spawn']>, events: WorldEvent[]): void {
  world.counters.spawned += 1;
  const id = `${world.prefix}spawned-${world.counters.spawned}`;
  world.entities.push({
    id,
    name: spawn.name,
    role: spawn.role,
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

/** M15: last timepoint's expectations against what the entities expected about did now. */
export function prospection(previous: TimepointRecord, resolved: Resolved[]): NonNullable<TimepointRecord['prospection']> {
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
