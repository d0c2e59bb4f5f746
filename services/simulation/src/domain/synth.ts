import { seedOf, sequence } from '@tempora/kit/providers';
import type { EntityReply, SceneReply } from './replies.ts';
import type { EntityRecord } from './world.ts';

/**
 * The offline provider's answers: deterministic functions of what the call was given (never of anything
 * it was not), so an offline run is reproducible and uses only knowledge its entities were exposed to.
 * They are stand-ins for a model's prose, labelled as offline in every result.
 */
export type Random = () => number;
export const randomFor = (...parts: string[]): Random => sequence(seedOf(...parts));
export const pick = <T>(random: Random, items: readonly T[]): T => items[Math.floor(random() * items.length) % items.length]!;

const MOODS = ['resolute', 'wary', 'hopeful', 'anxious', 'defiant', 'calculating', 'weary', 'elated', 'grim', 'restless'];
const VERBS = ['moves to', 'works quietly to', 'gathers support to', 'hesitates to', 'argues openly to', 'prepares to', 'manoeuvres to', 'bargains hard to'];
const WEATHER = ['still and overcast', 'a cold wind from the north', 'heavy rain', 'dry heat', 'fog over the water', 'clear skies'];
const SOUNDS = ['murmured voices', 'footsteps on stone', 'a distant bell', 'shouting outside', 'rain on the roof', 'the scratch of pens'];
const TONES = ['firmly', 'carefully', 'with open impatience', 'in a low voice', 'with a thin smile', 'after a long silence'];

const words = (sentence: string, limit: number) => sentence.split(/\s+/).slice(0, limit).join(' ');
const lower = (text: string) => text.charAt(0).toLowerCase() + text.slice(1);

export interface EntityContext {
  entity: EntityRecord;
  resolution: number;
  summaryWords: number;
  situation: string;
  /** Fact ids and texts the entity knows now (the only ones offered to it). */
  known: Array<{ id: string; text: string }>;
  others: Array<{ id: string; name: string; trust: number; tension: number }>;
  asks: { tells: boolean; expectations: boolean; alternative: boolean; body: boolean };
  /** DIRECTORIAL's tension target or CYCLICAL's escalation: larger swings. */
  intensity: number;
}

export function synthEntity(seed: string, timepoint: string, context: EntityContext, attempt: number): EntityReply {
  const random = randomFor(seed, timepoint, context.entity.id, String(attempt));
  const { entity, resolution } = context;
  const goal = lower(pick(random, entity.goals));
  const mood = pick(random, MOODS);
  const action = `${pick(random, VERBS)} ${goal}`;
  const used = context.known.length ? [...new Set([pick(random, context.known), ...(resolution >= 3 ? [pick(random, context.known)] : [])])] : [];
  const swing = 0.6 * context.intensity;
  const reply: EntityReply = {
    mood,
    summary: words(
      `${entity.name}, ${mood}, ${action} as ${lower(context.situation)}${used[0] ? `, mindful that ${lower(used[0].text)}` : ''}.`,
      context.summaryWords,
    ),
    action: resolution >= 2 ? `${entity.name} ${action}` : null,
    public_action: random() > 0.25,
    deltas: { influence: (random() - 0.45) * swing, resolve: (random() - 0.45) * swing, resources: (random() - 0.5) * swing },
    uses_knowledge: resolution >= 2 ? used.map((fact) => fact.id) : [],
    observation: resolution >= 2 ? `${entity.name} concludes that ${lower(context.situation)} decides whether they can ${goal}` : null,
    tells: [],
    stance: Object.fromEntries(
      context.others.map((other) => [
        other.id,
        other.trust + (random() - 0.5) * 0.3 - (context.intensity - 0.5) * 0.4 >= other.tension ? 'cooperate' : 'oppose',
      ]),
    ),
    expectations: [],
    alternative: null,
    exertion: Math.round(random() * 100) / 100,
  };
  if (resolution >= 3) {
    reply.intention = `${entity.name} means to ${goal} before the others move.`;
    const listener = [...context.others].sort((a, b) => b.trust - a.trust)[0];
    if (context.asks.tells && listener && used[0]) reply.tells = [{ to: listener.id, fact: used[0].id }];
  }
  if (resolution >= 4)
    reply.reasoning = `${entity.name} weighs ${context.known.length} things known against the risk: ${used.map((fact) => lower(fact.text)).join('; ') || 'little is certain'}. The aim stays to ${goal}.`;
  if (resolution >= 5)
    reply.monologue = `I am ${entity.name}, ${entity.role}. ${context.situation}. ${used.map((fact) => fact.text).join(' ')} If I do not ${goal}, who will? I feel ${mood}, and I will not let it show.`;
  if (context.asks.expectations) {
    reply.expectations = context.others.slice(0, 2).map((other) => ({
      about: other.id,
      prediction: reply.stance[other.id] === 'oppose' ? 'oppose' : 'cooperate',
      probability: Math.round((0.5 + random() * 0.4) * 100) / 100,
    }));
  }
  if (context.asks.alternative)
    reply.alternative = {
      action: `${entity.name} ${pick(
        random,
        VERBS.filter((verb) => !action.startsWith(verb)),
      )} ${goal}`,
      probability: Math.round((0.15 + random() * 0.3) * 100) / 100,
    };
  return reply;
}

export interface SceneContext {
  timepoint: string;
  hour: number;
  label: string;
  /** Speakers in order of importance, with what each knows now. */
  speakers: Array<{ id: string; name: string; known: string[] }>;
  events: Array<{ id: string; actor: string }>;
  /** Events of the timepoint before, which may have caused this one's. */
  earlier: Array<{ id: string; actor: string }>;
  turns: number;
  tension: number;
  /** Under M3 what a speaker reveals is known to its listener from the next turn on. */
  spreads: boolean;
  asks: { atmosphere: boolean; dialog: boolean; causes: boolean; spawn: boolean };
  factText: (id: string) => string;
}

export function synthScene(seed: string, context: SceneContext, attempt: number): SceneReply {
  const random = randomFor(seed, context.timepoint, 'scene', String(attempt));
  const reply: SceneReply = { atmosphere: null, dialog: [], causes: {}, spawn: null };
  if (context.asks.atmosphere) {
    const light =
      context.hour < 6 || context.hour >= 21
        ? 'lamplight against the dark'
        : context.hour < 10
          ? 'pale morning light'
          : context.hour < 17
            ? 'full daylight'
            : 'the long light of evening';
    reply.atmosphere = {
      mood: context.tension > 0.6 ? 'charged' : context.tension > 0.35 ? 'uneasy' : 'measured',
      weather: pick(random, WEATHER),
      light,
      sounds: pick(random, SOUNDS),
      tension: Math.round(context.tension * 100) / 100,
    };
  }
  if (context.asks.dialog && context.speakers.length >= 2) {
    const known = new Map(context.speakers.map((speaker) => [speaker.id, new Set(speaker.known)]));
    for (let turn = 0; turn < context.turns; turn += 1) {
      const speaker = context.speakers[turn % context.speakers.length]!;
      const listener = context.speakers[(turn + 1) % context.speakers.length]!;
      const mine = [...known.get(speaker.id)!];
      const used = mine.length ? pick(random, mine) : null;
      const news = mine.filter((fact) => !known.get(listener.id)!.has(fact));
      const reveals = turn % 2 === 1 && news.length ? pick(random, news) : null;
      const about = reveals ?? used;
      reply.dialog.push({
        speaker: speaker.id,
        to: listener.id,
        text: `${about ? `${context.factText(about)} ` : ''}${speaker.name} says ${pick(random, TONES)} that ${lower(context.label)} cannot wait.`,
        uses_knowledge: used ? [used] : [],
        reveals,
      });
      if (reveals && context.spreads) known.get(listener.id)!.add(reveals);
    }
  }
  if (context.asks.causes) {
    for (const event of context.events) {
      const own = context.earlier.find((earlier) => earlier.actor === event.actor);
      const other = context.earlier.length ? pick(random, context.earlier) : undefined;
      reply.causes[event.id] = [...new Set([own?.id, other?.id].filter((id): id is string => Boolean(id)))];
    }
  }
  if (context.asks.spawn) reply.spawn = { name: 'A messenger', role: 'carries word between the parties and sees more than is said' };
  return reply;
}
