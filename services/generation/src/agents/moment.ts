import { z } from 'zod';
import { charactersOf, context, HISTORIAN, nonEmpty, replyFormat } from './shared.ts';
import { defineAgent } from './types.ts';
import { anchorOf, yearLabel } from './world.ts';

const schema = z.object({
  summary: nonEmpty,
  stakes: z.string(),
  tension_level: z.number().min(0).max(1),
  plot_beats: z.array(z.string()).min(1).max(8),
  significance: z.string(),
});

export const moment = defineAgent({
  name: 'Moment',
  temperament: 'creative',
  role: 'The dramatic core: summary, stakes, tension level (0 to 1), plot beats and historical significance. Runs beside Camera.',
  system: `${HISTORIAN} You are the Moment agent. Identify the dramatic core of the instant being rendered: what is at stake, the beats of the next minutes, and why history remembers it.`,
  prompt: (brief) => `${context(brief, ['timeline', 'scene', 'characters'])}\n\n${replyFormat(schema)}`,
  schema,
  defaults: { stakes: '', significance: '', tension_level: 0.5 },
  offline(brief) {
    const anchor = anchorOf(brief);
    const lead = charactersOf(brief)[0]?.name ?? 'those present';
    return {
      summary: `${anchor.event_name}, ${yearLabel(anchor.year)}: ${lead} at the centre of it.`,
      stakes: `How ${anchor.event_name} unfolds will shape what follows at ${anchor.place.name}.`,
      tension_level: anchor.from_graph ? Math.min(1, 0.5 + (brief.graph_moment?.confidence ?? 0.5) / 2) : 0.6,
      plot_beats: [`The people gather at ${anchor.place.name}.`, `${lead} acts.`, 'The witnesses grasp what they have seen.'],
      significance: brief.graph_moment?.description || `Remembered as ${anchor.event_name}.`,
    };
  },
});
