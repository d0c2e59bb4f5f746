import { z } from 'zod';
import { HISTORIAN, nonEmpty, replyFormat } from './shared.ts';
import { defineAgent } from './types.ts';
import { yearOf } from './world.ts';

const schema = z.object({
  valid: z.boolean(),
  reason: z.string(),
  query_type: z.enum(['historical', 'fictional', 'speculative', 'invalid']),
  normalized_query: nonEmpty,
});

const REFUSED = /\b(porn|pornographic|nude|naked|sexual|gore|torture porn|how to (make|build) (a )?(bomb|weapon))\b/i;

export const judge = defineAgent({
  name: 'Judge',
  temperament: 'factual',
  role: 'Decides whether the query describes a renderable historical moment; rejects nonsense, future events and unsafe requests (422).',
  system: `${HISTORIAN} You are the Judge. Decide whether the query names or describes a moment in real history that can be rendered as a scene. Reject gibberish, events in the future, and sexual or violent-exploitative requests. Normalise the query into a short, clear description.`,
  prompt: (brief) => `Query: ${brief.query}\n\n${replyFormat(schema)}`,
  schema,
  defaults: { reason: '', query_type: 'historical' },
  offline(brief) {
    const query = brief.query.trim();
    const words = query.match(/[\p{L}]{2,}/gu) ?? [];
    const year = yearOf(query);
    const normalized_query = query.replace(/\s+/g, ' ');
    if (words.length === 0 || !/[aeiouy]/i.test(query) || /(.)\1{4,}/.test(query)) {
      return { valid: false, reason: 'the query does not describe a moment: it has no recognisable words', query_type: 'invalid' as const, normalized_query };
    }
    if (REFUSED.test(query))
      return { valid: false, reason: 'the query asks for content Tempora does not render', query_type: 'invalid' as const, normalized_query };
    if (year !== undefined && year > new Date().getUTCFullYear()) {
      return {
        valid: false,
        reason: `the year ${year} is in the future: Tempora renders moments that have happened`,
        query_type: 'speculative' as const,
        normalized_query,
      };
    }
    return {
      valid: true,
      reason: brief.graph_moment ? `known moment: ${brief.graph_moment.event_name}` : 'a describable historical moment',
      query_type: 'historical' as const,
      normalized_query,
    };
  },
});
