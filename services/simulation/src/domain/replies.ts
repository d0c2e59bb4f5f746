import { z } from 'zod';
import { ENTITY_KINDS, IMPORTANCE } from './vocabulary.ts';

/**
 * What the models are asked to answer, call by call. Fields a fidelity or mechanism does not ask for
 * default, so a terse model answer is still usable; fields are bounded so a runaway answer is refused.
 */
const unit = z.number().min(0).max(1);
const text = (max: number) => z.string().trim().max(max);
const delta = z.number().min(-1).max(1);

export const EntityReplySchema = z.object({
  mood: text(60).min(1).default('steady'),
  summary: text(4000).default(''),
  action: text(800).nullable().default(null),
  public_action: z.boolean().default(true),
  intention: text(800).optional(),
  reasoning: text(4000).optional(),
  monologue: text(12000).optional(),
  /** Changes to influence, resolve and resources; M4 keeps the results within [0, 1]. */
  deltas: z.object({ influence: delta.optional(), resolve: delta.optional(), resources: delta.optional() }).default({}),
  uses_knowledge: z.array(z.string().max(64)).max(20).default([]),
  /** Something the entity learns or concludes: a new fact it holds. */
  observation: text(400).nullable().default(null),
  tells: z
    .array(z.object({ to: z.string().max(64), fact: z.string().max(64) }))
    .max(6)
    .default([]),
  stance: z.record(z.string().max(64), z.enum(['cooperate', 'oppose', 'neutral'])).default({}),
  expectations: z
    .array(z.object({ about: z.string().max(64), prediction: z.enum(['cooperate', 'oppose']), probability: unit }))
    .max(4)
    .default([]),
  alternative: z
    .object({ action: text(400), probability: unit })
    .nullable()
    .default(null),
  exertion: unit.default(0.3),
  confidence: unit.optional(),
});
export type EntityReply = z.output<typeof EntityReplySchema>;

export const SceneReplySchema = z.object({
  atmosphere: z
    .object({ mood: text(80), weather: text(120), light: text(120), sounds: text(200), tension: unit })
    .nullable()
    .default(null),
  dialog: z
    .array(
      z.object({
        speaker: z.string().max(64),
        to: z.string().max(64).nullable().default(null),
        text: text(2000).min(1),
        uses_knowledge: z.array(z.string().max(64)).max(6).default([]),
        reveals: z.string().max(64).nullable().default(null),
      }),
    )
    .max(40)
    .default([]),
  /** M7: for each event of this timepoint, the earlier events that brought it about. */
  causes: z.record(z.string().max(64), z.array(z.string().max(64)).max(4)).default({}),
  spawn: z
    .object({ name: text(120).min(1), role: text(200).min(1) })
    .nullable()
    .default(null),
});
export type SceneReply = z.output<typeof SceneReplySchema>;

export const PlanReplySchema = z.object({
  title: text(200).min(1),
  place: text(200).min(1),
  era: text(120).min(1),
  entities: z
    .array(
      z.object({
        name: text(120).min(1),
        role: text(200).min(1),
        kind: z.enum(ENTITY_KINDS),
        importance: z.enum(IMPORTANCE),
        goals: z.array(text(300).min(1)).min(1).max(3),
      }),
    )
    .min(3)
    .max(6),
  facts: z
    .array(z.object({ fact: text(400).min(1), holders: z.array(z.number().int().min(0)).min(1) }))
    .min(2)
    .max(8),
  timepoints: z
    .array(z.object({ label: text(200).min(1), time: text(80).min(1), hour: z.number().int().min(0).max(23) }))
    .min(3)
    .max(5),
});
export type PlanReply = z.output<typeof PlanReplySchema>;

export const AntecedentsReplySchema = z.object({
  candidates: z
    .array(
      z.object({
        description: text(800).min(1),
        plausibility: unit,
        /** Facts of the world this antecedent rests on (checked like any knowledge use: they must exist). */
        rests_on: z.array(z.string().max(64)).max(6).default([]),
        states: z.record(z.string().max(64), z.object({ mood: text(60), summary: text(600) })).default({}),
      }),
    )
    .min(1)
    .max(6),
});
export type AntecedentsReply = z.output<typeof AntecedentsReplySchema>;

export const DirectorReplySchema = z.object({
  acts: z.array(z.object({ name: text(80).min(1), beat: text(600).min(1), tension: unit })).length(5),
});
export type DirectorReply = z.output<typeof DirectorReplySchema>;
