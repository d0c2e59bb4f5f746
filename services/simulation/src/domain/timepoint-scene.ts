import { dialogViolations, type ExposureViolation } from './exposure.ts';
import { fidelityOf } from './fidelity.ts';
import { type SceneReply, SceneReplySchema } from './replies.ts';
import { askValidated } from './step-calls.ts';
import { synthScene } from './synth.ts';
import type { Moment } from './timepoint.ts';
import type { Resolved } from './timepoint-entities.ts';
import { isAnimate, type Mechanism } from './vocabulary.ts';
import { knownFacts, round, type World, type WorldEvent } from './world.ts';

const SCENE = `You write what happens between the entities present at one moment of a simulation. Answer with one JSON object only.
A speaker may use or reveal only facts listed as known to that speaker (by id), or revealed to them earlier in this dialog.`;

const IMPORTANCE_ORDER = ['principal', 'supporting', 'minor'];

export const needsSceneCall = (has: (m: Mechanism) => boolean) => has('M7') || has('M9') || has('M10') || has('M11');

/** The scene call: atmosphere (M10), dialog (M11), causes (M7), an entity called in (M9), as the mechanisms ask. */
export async function sceneCall(moment: Moment, resolved: Resolved[], events: WorldEvent[]): Promise<SceneReply> {
  const { world, spec, ctx } = moment;
  const { plan, has } = ctx;
  const onStage = resolved.filter((item) => item.reply && isAnimate(item.entity.kind));
  const speakers = [...onStage]
    .sort((a, b) => IMPORTANCE_ORDER.indexOf(a.entity.importance) - IMPORTANCE_ORDER.indexOf(b.entity.importance))
    .map((item) => ({ id: item.entity.id, name: item.entity.name, known: knownFacts(world, item.entity.id) }));
  const earlier = world.timepoints.at(-1)?.events ?? [];
  const asks = {
    atmosphere: has('M10'),
    dialog: has('M11'),
    causes: has('M7'),
    spawn: has('M9') && world.counters.spawned === 0 && spec.index === Math.floor((plan.scenario?.timepoints.length ?? 5) / 2),
  };
  const turns = fidelityOf(plan.fidelity).dialogTurns;
  const eventIds = new Set([...events, ...earlier].map((event) => event.id));
  const speakerIds = speakers.map((speaker) => speaker.id);
  const { value } = await askValidated(
    ctx,
    'scene',
    {
      action: 'scene',
      resolution: plan.fidelity,
      system: SCENE,
      prompt: scenePrompt(moment, { speakers, events, earlier, asks, turns }),
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
            tension: moment.intensity,
            spreads: has('M3'),
            asks,
            factText: (id) => world.facts[id]!.text,
          },
          attempt,
        ),
    },
    (answer) => sceneViolations(world, answer, speakerIds, eventIds, has('M3')),
  );
  return value;
}

interface SceneAsk {
  speakers: Array<{ id: string; name: string; known: string[] }>;
  events: WorldEvent[];
  earlier: WorldEvent[];
  asks: { atmosphere: boolean; dialog: boolean; causes: boolean; spawn: boolean };
  turns: number;
}

/** What the scene's model is told: the moment, who speaks and what each knows, what happened; the fields asked for. */
function scenePrompt({ world, spec }: Moment, { speakers, events, earlier, asks, turns }: SceneAsk): string {
  const tension = spec.intensity ?? round(world.relationships.reduce((sum, pair) => sum + pair.tension, 0) / Math.max(world.relationships.length, 1), 2);
  return JSON.stringify({
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
}

/** A scene is refused when a speaker reveals what it does not know, speaks off stage, or names a cause that is no event. */
function sceneViolations(world: World, answer: SceneReply, speakerIds: string[], eventIds: Set<string>, spreads: boolean): ExposureViolation[] {
  return [
    ...dialogViolations(world, answer.dialog, speakerIds, spreads),
    ...answer.dialog
      .filter((turn) => !speakerIds.includes(turn.speaker))
      .map((turn) => ({ entity: turn.speaker, fact: turn.reveals ?? '-', where: 'dialog speaker not on stage', reason: 'not exposed' as const })),
    ...Object.values(answer.causes)
      .flat()
      .filter((id) => !eventIds.has(id))
      .map((id) => ({ entity: 'scene', fact: id, where: 'causes', reason: 'unknown fact' as const })),
  ];
}

/** M7 links each event to the scene's causes of it; M17 qualifies each link (or, without causes, each act's link to the moment before). */
export function linkCauses({ ctx, previous }: Moment, events: WorldEvent[], scene: SceneReply | null): void {
  const { has } = ctx;
  if (has('M7') && scene) {
    for (const event of events) {
      const causes = scene.causes[event.id] ?? [];
      if (causes.length) {
        event.caused_by = causes;
        if (has('M17')) event.modality = causes.length === 1 ? 'necessary' : 'contributing';
      }
    }
  } else if (has('M17') && previous) {
    for (const event of events) event.modality = event.public ? 'sufficient' : 'contributing';
  }
}
