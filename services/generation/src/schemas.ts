import { LlmParamsSchema } from '@tempora/kit/providers';
import { z } from 'zod';

export const PRESETS = ['hyper', 'balanced', 'hd', 'gemini3'] as const;
export type Preset = (typeof PRESETS)[number];

const modelId = z.string().trim().min(1).max(200);

export const GenerateRequestSchema = z
  .strictObject({
    query: z.string().trim().min(3).max(500).meta({ description: '3 to 500 characters; description of the moment' }),
    generate_image: z.boolean().default(false),
    preset: z.enum(PRESETS).optional().meta({ description: 'balanced when omitted (server defaults)' }),
    text_model: modelId.optional().meta({ description: '`org/model` (aggregator) or `gemini-…` (native provider)' }),
    image_model: modelId
      .optional()
      .meta({ description: '`stability/sd3.5-…`, `pollinations`, a `gemini-…` image model or an `org/model` aggregator image model' }),
    model_policy: z.enum(['permissive']).optional(),
    llm_params: LlmParamsSchema.optional(),
    visibility: z.enum(['public', 'private']).default('public'),
    callback_url: z
      .url({ protocol: /^https?$/ })
      .max(2000)
      .optional()
      .meta({ description: 'async only: receives the signed result' }),
    request_context: z.record(z.string(), z.unknown()).optional().meta({ description: 'opaque; returned unchanged' }),
  })
  .meta({ id: 'GenerateRequest' });
export type GenerateRequest = z.output<typeof GenerateRequestSchema>;

export const VisibilityBodySchema = z.strictObject({ visibility: z.enum(['public', 'private']) });

const loose = z.record(z.string(), z.unknown());
export const SceneSchema = z
  .object({
    id: z.string(),
    query: z.string(),
    slug: z.string(),
    status: z.string(),
    title: z.string(),
    year: z.number().int(),
    month: z.number().int(),
    day: z.number().int(),
    time: z.string(),
    era: z.string(),
    path: z.string(),
    location: loose,
    scene: loose,
    characters: z.array(loose),
    relationships: z.array(loose),
    moment: loose,
    camera: loose,
    dialog: z.array(loose),
    critique: loose.nullable(),
    image_prompt: z.string().nullable(),
    image_url: z.string().nullable().optional(),
    confidence: loose,
    sources: z.array(loose),
    models: loose,
    preset: z.string(),
    timings: loose,
    visibility: z.enum(['public', 'private']),
    owner: z.string().nullable(),
    request_context: loose.nullable(),
  })
  .passthrough()
  .meta({ id: 'Scene', description: 'The scene record (docs/generation.md)' });
