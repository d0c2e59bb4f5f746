import { z } from 'zod';
import { context, HISTORIAN, replyFormat } from './shared.ts';
import { defineAgent } from './types.ts';
import { anchorOf, yearLabel } from './world.ts';

const schema = z.object({
  facts: z.array(z.string()).max(20),
  sources: z.array(z.object({ title: z.string(), url: z.string() })).max(20),
  verified: z.boolean(),
  corrections: z.array(z.string()).max(10),
});

export const grounding = defineAgent({
  name: 'Grounding',
  temperament: 'factual',
  grounding: true,
  role: 'Optional. Checks the timeline against sources (web search on the native provider) and returns facts, corrections and citations. Skipped under model_policy permissive; failure is a warning.',
  system: `${HISTORIAN} You are the Grounding agent. Verify the timeline against reliable sources. List key facts, any corrections to the timeline, and your sources with URLs.`,
  prompt: (brief) => `${context(brief, ['timeline'])}\n\n${replyFormat(schema)}`,
  schema,
  defaults: { facts: [], sources: [], corrections: [], verified: false },
  offline(brief) {
    const anchor = anchorOf(brief);
    const moment = brief.graph_moment;
    if (!moment)
      return { facts: [`${anchor.event_name} (${yearLabel(anchor.year)}), as described by the query`], sources: [], verified: false, corrections: [] };
    return {
      facts: [
        moment.description || moment.event_name,
        `${moment.event_name} took place in ${yearLabel(moment.year)}.`,
        ...(moment.figures.length ? [`Figures: ${moment.figures.join(', ')}.`] : []),
      ].filter(Boolean),
      sources: [{ title: `Tempora graph: ${moment.event_name}`, url: moment.url }],
      verified: true,
      corrections: [],
    };
  },
});
