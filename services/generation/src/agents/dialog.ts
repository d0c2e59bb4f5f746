import { z } from 'zod';
import { charactersOf, context, HISTORIAN, nonEmpty, replyFormat } from './shared.ts';
import { defineAgent } from './types.ts';
import { anchorOf } from './world.ts';

const schema = z.object({
  lines: z
    .array(z.object({ speaker: nonEmpty, text: nonEmpty, tone: z.string() }))
    .min(1)
    .max(20),
});

export const dialog = defineAgent({
  name: 'Dialog',
  temperament: 'dialog',
  role: 'Writes 4 to 10 lines of period-appropriate dialog for the people present; rewritten once when Critique asks for it.',
  system: `${HISTORIAN} You are the Dialog agent. Write short, period-appropriate dialog (4 to 10 lines) for the people present, true to their bios and relationships. Only people in the character list speak.`,
  prompt: (brief) => {
    const revision = brief.revision_feedback
      ? `\n\nYour previous draft was sent back by the critic. Draft: ${JSON.stringify(brief.previous_dialog)}\nFeedback: ${String(brief.revision_feedback)}\nRewrite it.`
      : '';
    return `${context(brief, ['timeline', 'grounding', 'scene', 'characters', 'bios', 'graph', 'moment'])}${revision}\n\n${replyFormat(schema)}`;
  },
  schema,
  defaults: {},
  offline(brief) {
    const anchor = anchorOf(brief);
    const people = charactersOf(brief);
    const first = people[0]?.name ?? 'A Voice';
    const second = people[1]?.name ?? 'Another Voice';
    const lines = [
      { speaker: second, text: `Is it true, then? Today, here at ${anchor.place.name}?`, tone: 'hushed' },
      { speaker: first, text: 'It is. There is no turning back from it now.', tone: 'resolute' },
      { speaker: second, text: 'Then they will speak of this day for a long time.', tone: 'awed' },
      { speaker: first, text: 'Let them. We have work to do before the light goes.', tone: 'firm' },
    ];
    if (brief.revision_feedback) lines.push({ speaker: second, text: 'I will remember every word.', tone: 'quiet' });
    return { lines };
  },
});
