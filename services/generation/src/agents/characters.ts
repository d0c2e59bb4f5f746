import { z } from 'zod';
import { context, HISTORIAN, nonEmpty, replyFormat } from './shared.ts';
import { defineAgent } from './types.ts';
import { anchorOf } from './world.ts';

const character = z.object({
  name: nonEmpty,
  role: nonEmpty,
  is_historical: z.boolean(),
  description: z.string(),
});
const schema = z.object({ characters: z.array(character).min(1).max(8) });

const WITNESSES = [
  { name: 'A Chronicler', role: 'witness who wrote the moment down', description: 'Keeps a wax tablet or notebook close and misses nothing.' },
  { name: 'A Guard', role: 'guard at the threshold', description: 'Armed, wary, and more frightened than he shows.' },
  { name: 'A Messenger', role: 'messenger', description: 'Out of breath, carrying news that will change the day.' },
];

export const characters = defineAgent({
  name: 'Characters',
  temperament: 'factual',
  role: 'Chooses who is present (2 to 6 people): historical figures first, then plausible witnesses, each with role and short description.',
  system: `${HISTORIAN} You are the Characters agent. Choose the people present at the moment: the historical figures who were there, then at most two plausible unnamed witnesses. Mark invented people is_historical false.`,
  prompt: (brief) => `${context(brief, ['timeline', 'grounding', 'scene'])}\n\n${replyFormat(schema)}`,
  schema,
  defaults: {},
  offline(brief) {
    const anchor = anchorOf(brief);
    const people = anchor.figures.slice(0, 4).map((name, index) => ({
      name,
      role: index === 0 ? 'central figure' : 'participant',
      is_historical: true,
      description: `${name}, present at ${anchor.event_name}.`,
    }));
    for (const witness of WITNESSES) {
      if (people.length >= Math.max(2, Math.min(4, people.length + 1))) break;
      people.push({ ...witness, is_historical: false });
    }
    return { characters: people };
  },
});
