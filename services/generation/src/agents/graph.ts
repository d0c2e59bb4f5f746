import { z } from 'zod';
import { charactersOf, context, HISTORIAN, nonEmpty, replyFormat } from './shared.ts';
import { defineAgent } from './types.ts';

const schema = z.object({
  relationships: z.array(z.object({ from: nonEmpty, to: nonEmpty, type: nonEmpty, description: z.string() })).max(30),
  factions: z.array(z.object({ name: nonEmpty, members: z.array(z.string()) })).max(10),
  tensions: z.array(z.string()).max(10),
});

export const graph = defineAgent({
  name: 'Graph',
  temperament: 'factual',
  role: 'Maps the people: relationships (ally, rival, subordinate, family...), factions and open tensions.',
  system: `${HISTORIAN} You are the Graph agent. Describe how the people present relate to one another at this moment: relationships, factions, and the tensions between them.`,
  prompt: (brief) => `${context(brief, ['timeline', 'characters', 'bios'])}\n\n${replyFormat(schema)}`,
  schema,
  defaults: { factions: [], tensions: [] },
  offline(brief) {
    const people = charactersOf(brief);
    const relationships = [];
    for (let index = 1; index < people.length; index += 1) {
      const from = people[0]!;
      const to = people[index]!;
      relationships.push({
        from: from.name,
        to: to.name,
        type: to.is_historical ? 'peer' : 'observed-by',
        description: to.is_historical ? `${from.name} and ${to.name} share the stage of this moment.` : `${to.name} watches ${from.name}.`,
      });
    }
    const historical = people.filter((person) => person.is_historical).map((person) => person.name);
    const witnesses = people.filter((person) => !person.is_historical).map((person) => person.name);
    return {
      relationships,
      factions: [
        ...(historical.length ? [{ name: 'principals', members: historical }] : []),
        ...(witnesses.length ? [{ name: 'witnesses', members: witnesses }] : []),
      ],
      tensions: people.length > 1 ? [`What ${people[0]!.name} does next will decide the day for everyone present.`] : [],
    };
  },
});
