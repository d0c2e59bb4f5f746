import { z } from 'zod';
import { charactersOf, context, HISTORIAN, replyFormat } from './shared.ts';
import { defineAgent } from './types.ts';
import { pick, random } from './world.ts';

const schema = z.object({
  shot: z.string(),
  angle: z.string(),
  lens: z.string(),
  composition: z.string(),
  focus: z.string(),
  movement: z.string(),
});

export const camera = defineAgent({
  name: 'Camera',
  temperament: 'creative',
  role: 'Frames the scene as a cinematographer would: shot, angle, lens, composition, focus and movement. Runs beside Moment.',
  system: `${HISTORIAN} You are the Camera agent. Frame the scene as a cinematographer: choose the shot, angle, lens, composition, focus and camera movement.`,
  prompt: (brief) => `${context(brief, ['scene', 'characters'])}\n\n${replyFormat(schema)}`,
  schema,
  defaults: { movement: 'static', focus: '', lens: '35mm' },
  offline(brief) {
    const next = random(brief, 'camera');
    const lead = charactersOf(brief)[0]?.name ?? 'the centre of the scene';
    return {
      shot: pick(next, ['wide establishing shot', 'medium shot', 'medium close-up']),
      angle: pick(next, ['eye level', 'slightly low angle', 'high angle over the crowd']),
      lens: pick(next, ['24mm', '35mm', '50mm']),
      composition: `rule of thirds, ${lead} on the left third, the setting opening out behind`,
      focus: lead,
      movement: pick(next, ['static', 'slow push-in', 'gentle pan']),
    };
  },
});
