import type { ProviderKind } from '@tempora/kit/providers';
import type { z } from 'zod';
import { camera } from './camera.ts';
import { characterBio } from './character-bio.ts';
import { characters } from './characters.ts';
import { critique } from './critique.ts';
import { dialog } from './dialog.ts';
import { graph } from './graph.ts';
import { grounding } from './grounding.ts';
import { imagePrompt } from './image-prompt.ts';
import { judge } from './judge.ts';
import { moment } from './moment.ts';
import { optimizer } from './optimizer.ts';
import { scene } from './scene.ts';
import { timeline } from './timeline.ts';
import type { AgentName, TextAgent, TextAgentName } from './types.ts';

/** The 13 text agents by name; the 14th, ImageGen, calls image models (`runImage` in pipeline/task.ts). */
export const TEXT_AGENTS = {
  Judge: judge,
  Timeline: timeline,
  Grounding: grounding,
  Scene: scene,
  Characters: characters,
  CharacterBio: characterBio,
  Graph: graph,
  Moment: moment,
  Camera: camera,
  Dialog: dialog,
  Critique: critique,
  ImagePrompt: imagePrompt,
  Optimizer: optimizer,
} satisfies { [N in TextAgentName]: TextAgent };

/** What ImageGen reports as its output (the image itself travels beside it). */
export interface ImageGenOutput {
  model: string;
  provider: ProviderKind;
  mime_type: string;
}

/** An agent's validated output: a text agent's is its zod schema's type. */
export type AgentOutput<N extends AgentName> = N extends TextAgentName ? z.infer<(typeof TEXT_AGENTS)[N]['schema']> : ImageGenOutput;

export * from './types.ts';
