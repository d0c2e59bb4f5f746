import { z } from 'zod';
import { context, HISTORIAN, nonEmpty, replyFormat, when } from './shared.ts';
import { defineAgent } from './types.ts';
import { anchorOf, pick, random } from './world.ts';

const schema = z.object({
  title: nonEmpty,
  setting: nonEmpty,
  atmosphere: nonEmpty,
  weather: z.string(),
  lighting: z.string(),
  sounds: z.array(z.string()).max(10),
  smells: z.array(z.string()).max(10),
  mood: z.string(),
  description: nonEmpty,
});

const WEATHER = ['a cold, clear morning', 'low grey cloud and a damp wind', 'heavy summer heat', 'a thin rain that will not stop', 'bright, dry air'];
const MOODS = ['tense', 'expectant', 'solemn', 'restless', 'jubilant', 'uneasy'];
const SOUNDS = ['murmured voices', 'footsteps on stone', 'a distant bell', 'wind through an open door', 'the creak of wood', 'a crowd beyond the walls'];
const SMELLS = ['smoke', 'wet stone', 'ink and paper', 'horses', 'incense', 'sweat and dust'];

export const scene = defineAgent({
  name: 'Scene',
  temperament: 'scene',
  role: 'Builds the setting: title, place description, atmosphere, weather, lighting, sounds, smells and mood.',
  system: `${HISTORIAN} You are the Scene agent. Describe the physical setting of the moment as a film's production designer would: concrete, sensory, period-accurate.`,
  prompt: (brief) => `${context(brief, ['timeline', 'grounding'])}\n\n${replyFormat(schema)}`,
  schema,
  defaults: { weather: '', lighting: '', sounds: [], smells: [], mood: '' },
  offline(brief) {
    const anchor = anchorOf(brief);
    const next = random(brief, 'scene');
    const weather = pick(next, WEATHER);
    const mood = pick(next, MOODS);
    const hour = Number(anchor.time.slice(0, 2));
    const lighting = hour < 8 ? 'early light, long shadows' : hour < 17 ? 'full daylight' : 'lamplight and failing daylight';
    return {
      title: anchor.event_name,
      setting: `${anchor.place.name}, ${when(brief)}`,
      atmosphere: `A ${mood} gathering at ${anchor.place.name}; everyone present senses that the day will be remembered.`,
      weather,
      lighting,
      sounds: [pick(next, SOUNDS), pick(next, SOUNDS)].filter((value, index, all) => all.indexOf(value) === index),
      smells: [pick(next, SMELLS), pick(next, SMELLS)].filter((value, index, all) => all.indexOf(value) === index),
      mood,
      description:
        `${anchor.event_name}. ${brief.graph_moment?.description ?? ''} ${weather.charAt(0).toUpperCase() + weather.slice(1)} over ${anchor.place.name}; ${lighting}.`
          .replace(/\s+/g, ' ')
          .trim(),
    };
  },
});
