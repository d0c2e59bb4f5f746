import { z } from 'zod';

/**
 * The four options of an account's conductor (the spec names them and leaves their values to us;
 * docs/conductor.md, "The four options").
 */
export const AUTONOMY = ['ask_before_paid', 'ask_once', 'act_within_ceiling'] as const;
export const VERBOSITY = ['brief', 'normal', 'detailed'] as const;
export const RENDER = ['text', 'rich'] as const;
export type Autonomy = (typeof AUTONOMY)[number];
export type Verbosity = (typeof VERBOSITY)[number];
export type DefaultRender = (typeof RENDER)[number];

/** The largest per-request budget an account may set (a request is also bounded by its step and token caps). */
export const MAX_SPEND_CEILING = 10_000;

export interface ConductorSettings {
  autonomy: Autonomy;
  verbosity: Verbosity;
  /** Credits one request may spend before the conductor pauses to ask. */
  spend_ceiling: number;
  default_render: DefaultRender;
}

export const DEFAULT_SETTINGS: ConductorSettings = { autonomy: 'act_within_ceiling', verbosity: 'normal', spend_ceiling: 15, default_render: 'text' };

export const SettingsSchema = z
  .object({
    autonomy: z.enum(AUTONOMY).meta({
      description:
        'ask_before_paid: pause before every paid tool call; ask_once: pause before the first paid call of a request, then act within the ceiling; act_within_ceiling: pause only when a call would pass the ceiling or the balance',
    }),
    verbosity: z
      .enum(VERBOSITY)
      .meta({ description: 'brief: one line per result; normal: the results and what they cost; detailed: every result in full, with its arguments' }),
    spend_ceiling: z
      .number()
      .int()
      .min(0)
      .max(MAX_SPEND_CEILING)
      .meta({ description: 'credits one request may spend before the conductor pauses to ask (0: every paid call asks)' }),
    default_render: z.enum(RENDER).meta({ description: 'text: scenes are rendered without images; rich: with an image (it costs the image surcharge)' }),
  })
  .meta({ id: 'ConductorSettings' });

export const SettingsPatch = SettingsSchema.partial()
  .strict()
  .refine((patch) => Object.keys(patch).length > 0, { message: 'name at least one of autonomy, verbosity, spend_ceiling, default_render' });
export type SettingsPatch = z.output<typeof SettingsPatch>;

/** Why a paid call waits for the user, or undefined when it may go ahead. */
export type PauseReason = 'autonomy' | 'ceiling' | 'balance';

/**
 * The autonomy rule for one paid call: `approved` is true when the user confirmed this very call;
 * `confirmedBefore` when the user confirmed an earlier call of the same request (which is what `ask_once`
 * waits for). A confirmed call goes ahead even past the ceiling (the user saw the cost), never past the balance.
 */
export function pauseReason(
  settings: ConductorSettings,
  call: { price: number; runningTotal: number; approved: boolean; confirmedBefore: boolean },
): Exclude<PauseReason, 'balance'> | undefined {
  if (call.approved) return undefined;
  if (settings.autonomy === 'ask_before_paid') return 'autonomy';
  if (settings.autonomy === 'ask_once' && !call.confirmedBefore) return 'autonomy';
  if (call.runningTotal + call.price > settings.spend_ceiling) return 'ceiling';
  return undefined;
}
