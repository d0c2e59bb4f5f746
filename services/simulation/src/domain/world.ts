import type { Scenario } from './plan.ts';
import type { EntityKind, Importance, StateVariable } from './vocabulary.ts';

/**
 * The state a run carries from step to step: plain JSON, persisted after every step, so a run resumed by
 * another process continues from exactly where the last completed step left it.
 */
export interface EntityRecord {
  id: string;
  name: string;
  role: string;
  kind: EntityKind;
  importance: Importance;
  goals: string[];
  /** M9: the timepoint at which the narrative called this entity into being. */
  spawned_at?: string;
}

export interface Fact {
  id: string;
  text: string;
  secret: boolean;
  /** Who produced it, where and in which step (null for the template's starting knowledge). */
  origin: { entity: string | null; timepoint: string | null; step: number | null };
}

export type ExposureChannel = 'initial' | 'own' | 'witnessed' | 'told' | 'dialog';

/** How an entity came to know a fact: the only licence for using it. */
export interface Exposure {
  entity: string;
  fact: string;
  channel: ExposureChannel;
  /** The entity it came from (told, dialog). */
  source: string | null;
  timepoint: string | null;
  step: number | null;
}

export interface Relationship {
  a: string;
  b: string;
  trust: number;
  affinity: number;
  tension: number;
}

export interface EntityState {
  entity: string;
  timepoint: string;
  step: number;
  /** False when the entity was carried over without a model call (M5, or asleep under M14). */
  resolved: boolean;
  resolution: number;
  mood: string;
  summary: string;
  action: string | null;
  intention?: string;
  reasoning?: string;
  monologue?: string;
  vars: Record<StateVariable, number>;
  uses_knowledge: string[];
  confidence: number;
  model?: string;
  body?: { health: number; fatigue: number; location: string };
  training?: { appearances: number; level: number };
  expectations?: Array<{ about: string; prediction: 'cooperate' | 'oppose'; probability: number }>;
  alternative?: { action: string; probability: number };
  compression?: { digest: string; full_tokens: number; compressed_tokens: number };
  circadian?: { hour: number; activity: number; asleep: boolean };
}

export interface WorldEvent {
  id: string;
  timepoint: string;
  step: number;
  actor: string;
  text: string;
  public: boolean;
  confidence: number;
  /** M7: the earlier events that brought this one about. */
  caused_by?: string[];
  /** M17: how it depends on its causes. */
  modality?: 'necessary' | 'sufficient' | 'contributing';
}

export interface DialogTurn {
  speaker: string;
  to: string | null;
  text: string;
  uses_knowledge: string[];
  reveals: string | null;
  confidence: number;
}

export interface TimepointRecord {
  id: string;
  index: number;
  label: string;
  time: string;
  hour: number;
  step: number;
  /** The timepoint this one follows from (a temporal edge). */
  follows: string | null;
  states: EntityState[];
  events: WorldEvent[];
  dialog: DialogTurn[];
  relationships: Relationship[];
  atmosphere?: { mood: string; weather: string; light: string; sounds: string; tension: number };
  asymmetry?: Array<{ a: string; b: string; a_only: number; b_only: number; index: number }>;
  constraint_repairs?: Array<{ entity: string; variable: string; from: number; to: number }>;
  prospection?: Array<{ entity: string; about: string; predicted: string; realised: string; correct: boolean }>;
  withheld?: Array<{ from: string; to: string; fact: string; reason: string }>;
  /** Mode-specific annotations (tension target, cycle, branch). */
  direction?: Record<string, unknown>;
  confidence: number;
}

export interface World {
  /** Prefixes the ids of this world's facts and events (a counterfactual world's are `cf-…`). */
  prefix: string;
  entities: EntityRecord[];
  /** Each entity's state variables before the first timepoint. */
  start: Record<string, Record<StateVariable, number>>;
  facts: Record<string, Fact>;
  exposures: Exposure[];
  relationships: Relationship[];
  latest: Record<string, EntityState>;
  timepoints: TimepointRecord[];
  counters: { facts: number; events: number; spawned: number };
}

export const pairKey = (a: string, b: string) => (a < b ? `${a}|${b}` : `${b}|${a}`);

export const clone = <T>(value: T): T => structuredClone(value);

/** Facts an entity has been exposed to, in the order it learned them. */
export function knownFacts(world: World, entity: string): string[] {
  const seen = new Set<string>();
  for (const exposure of world.exposures) if (exposure.entity === entity) seen.add(exposure.fact);
  return [...seen];
}

export function knows(world: World, entity: string, fact: string): boolean {
  return world.exposures.some((exposure) => exposure.entity === entity && exposure.fact === fact);
}

export function expose(world: World, exposure: Exposure): boolean {
  if (knows(world, exposure.entity, exposure.fact)) return false;
  world.exposures.push(exposure);
  return true;
}

export function relationship(world: World, a: string, b: string): Relationship | undefined {
  const key = pairKey(a, b);
  return world.relationships.find((pair) => pairKey(pair.a, pair.b) === key);
}

export const round = (value: number, digits = 3) => Math.round(value * 10 ** digits) / 10 ** digits;
export const clamp01 = (value: number) => Math.min(1, Math.max(0, value));

/** The world before the first timepoint: the scenario's entities, relationships and starting knowledge. */
export function createWorld(scenario: Scenario): World {
  const world: World = {
    prefix: '',
    entities: scenario.entities.map(({ state: _state, ...entity }) => ({ ...entity })),
    start: Object.fromEntries(scenario.entities.map((entity) => [entity.id, { ...entity.state }])),
    facts: {},
    exposures: [],
    relationships: scenario.relationships.map((pair) => ({ ...pair })),
    latest: {},
    timepoints: [],
    counters: { facts: 0, events: 0, spawned: 0 },
  };
  for (const item of scenario.knowledge) {
    world.facts[item.id] = { id: item.id, text: item.fact, secret: item.secret, origin: { entity: null, timepoint: null, step: null } };
    for (const holder of item.holders) world.exposures.push({ entity: holder, fact: item.id, channel: 'initial', source: null, timepoint: null, step: null });
  }
  return world;
}
