import { z } from 'zod';
import { charactersOf, context, HISTORIAN, nonEmpty, replyFormat } from './shared.ts';
import { defineAgent } from './types.ts';
import { anchorOf, yearLabel } from './world.ts';

const schema = z.object({ prompt: nonEmpty, negative_prompt: z.string(), style: z.string() });

export const imagePrompt = defineAgent({
  name: 'ImagePrompt',
  temperament: 'creative',
  role: 'Writes the image prompt from scene, camera and moment (stored as image_prompt even without an image). Optional.',
  system: `${HISTORIAN} You are the ImagePrompt agent. Write a detailed prompt for a photorealistic, period-accurate still of this moment, using the camera's framing. Add a negative prompt listing anachronisms to avoid.`,
  prompt: (brief) => `${context(brief, ['timeline', 'scene', 'characters', 'moment', 'camera'])}\n\n${replyFormat(schema)}`,
  schema,
  defaults: { negative_prompt: 'modern clothing, text, watermark, anachronistic objects', style: 'photorealistic historical film still' },
  offline(brief) {
    const anchor = anchorOf(brief);
    const scene = brief.scene as { weather?: string; lighting?: string } | undefined;
    const camera = brief.camera as { shot?: string; angle?: string; lens?: string } | undefined;
    const people = charactersOf(brief)
      .map((person) => person.name)
      .join(', ');
    return {
      prompt: `${camera?.shot ?? 'wide shot'}, ${camera?.angle ?? 'eye level'}, ${camera?.lens ?? '35mm'} lens: ${anchor.event_name}, ${anchor.place.name}, ${yearLabel(anchor.year)}. ${people ? `With ${people}. ` : ''}${scene?.weather ?? ''}, ${scene?.lighting ?? ''}. Period-accurate costume and architecture.`,
      negative_prompt: 'modern clothing, text, watermark, anachronistic objects',
      style: 'photorealistic historical film still',
    };
  },
});
