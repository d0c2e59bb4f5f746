import { z } from 'zod';
import { context, HISTORIAN, nonEmpty, replyFormat } from './shared.ts';
import { defineAgent } from './types.ts';

const schema = z.object({
  prompt: nonEmpty.max(2000),
  negative_prompt: z.string().max(1000),
  aspect_ratio: z.enum(['16:9', '1:1', '4:3', '3:2']),
});

/** Diffusion models read about 75 tokens of prompt: the optimiser keeps the most concrete words first. */
export const optimizer = defineAgent({
  name: 'Optimizer',
  temperament: 'factual',
  role: 'Rewrites the image prompt for the chosen image model (concise, most concrete words first, aspect ratio). Runs only with generate_image.',
  system: `${HISTORIAN} You are the Optimizer agent. Rewrite the image prompt for the target image model: under 70 words, the subject and setting first, then light, lens and style. Keep the negative prompt short.`,
  prompt: (brief) => `${context(brief, ['image_prompt', 'image_model'])}\n\n${replyFormat(schema)}`,
  schema,
  defaults: { negative_prompt: '', aspect_ratio: '16:9' },
  offline(brief) {
    const source = brief.image_prompt as { prompt?: string; negative_prompt?: string; style?: string } | undefined;
    const words = `${source?.prompt ?? brief.query}, ${source?.style ?? 'photorealistic'}`.split(/\s+/).slice(0, 70).join(' ');
    return { prompt: words, negative_prompt: (source?.negative_prompt ?? '').slice(0, 300), aspect_ratio: '16:9' as const };
  },
});
