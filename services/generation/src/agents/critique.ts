import { z } from 'zod';
import { context, HISTORIAN, replyFormat } from './shared.ts';
import { defineAgent } from './types.ts';

const schema = z.object({
  score: z.number().min(0).max(1),
  historical_accuracy: z.number().min(0).max(1),
  dialog_quality: z.number().min(0).max(1),
  revise: z.boolean(),
  feedback: z.string(),
  issues: z.array(z.string()).max(20),
  anachronisms: z.array(z.string()).max(20),
});

export const critique = defineAgent({
  name: 'Critique',
  temperament: 'factual',
  role: 'Reviews dialog and facts: scores (0 to 1), anachronisms and issues; may send Dialog back once for a rewrite. Optional: failure is a warning.',
  system: `${HISTORIAN} You are the Critique agent. Check the dialog against the timeline, the people and the facts. Flag anachronisms. Set revise true only if the dialog must be rewritten, and say how in feedback.`,
  prompt: (brief) => `${context(brief, ['timeline', 'grounding', 'characters', 'dialog'])}\n\n${replyFormat(schema)}`,
  schema,
  defaults: { issues: [], anachronisms: [], feedback: '', revise: false },
  offline(brief) {
    const lines = (brief.dialog as { lines?: Array<{ text: string }> } | undefined)?.lines ?? [];
    const known = Boolean(brief.graph_moment);
    const short = lines.length < 3;
    return {
      score: known ? 0.8 : 0.6,
      historical_accuracy: known ? 0.85 : 0.55,
      dialog_quality: short ? 0.5 : 0.7,
      revise: short && !brief.revision_feedback,
      feedback: short ? 'The exchange is too short to carry the moment; add a line.' : 'Dialog is consistent with the timeline.',
      issues: known ? [] : ['the moment is not in the Tempora graph: details are inferred from the query'],
      anachronisms: [],
    };
  },
});
