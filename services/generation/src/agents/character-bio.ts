import { z } from 'zod';
import { type CharacterRef, context, HISTORIAN, nonEmpty, replyFormat } from './shared.ts';
import { defineAgent } from './types.ts';
import { anchorOf, pick, random } from './world.ts';

const schema = z.object({
  name: nonEmpty,
  bio: nonEmpty,
  appearance: z.string(),
  motivation: z.string(),
  speaking_style: z.string(),
});

const STYLES = ['clipped and formal', 'warm, with dry humour', 'measured, choosing every word', 'blunt and quick', 'quiet, almost whispered'];

/** One call per character, all in parallel; the brief's `character` names whom this call is about. */
export const characterBio = defineAgent({
  name: 'CharacterBio',
  temperament: 'creative',
  role: 'One call per character, in parallel: biography, appearance, motivation in this moment and speaking style.',
  system: `${HISTORIAN} You are the CharacterBio agent. Write a short biography of one person as they were at this moment: appearance, what they want right now, and how they speak.`,
  prompt: (brief) => `${context(brief, ['timeline', 'scene', 'character'])}\n\n${replyFormat(schema)}`,
  schema,
  defaults: { appearance: '', motivation: '', speaking_style: '' },
  offline(brief) {
    const person = brief.character as CharacterRef;
    const anchor = anchorOf(brief);
    const next = random(brief, `bio:${person.name}`);
    return {
      name: person.name,
      bio: person.is_historical
        ? `${person.name}, ${person.role}, at ${anchor.event_name}. ${person.description}`
        : `An unnamed ${person.role} of ${anchor.place.name}. ${person.description}`,
      appearance: `Dressed as befits a ${person.role} of the ${anchor.era.replace(/-/g, ' ')}.`,
      motivation: person.role === 'central figure' ? 'to see this day through on their own terms' : 'to understand what is happening and survive it',
      speaking_style: pick(next, STYLES),
    };
  },
});
