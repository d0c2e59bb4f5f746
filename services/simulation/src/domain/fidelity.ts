/**
 * Fidelity 1–5 (docs/simulation.md, "Fidelity"): the resolution of each entity at each timepoint, what a
 * run may spend and so how many tokens each of its model calls may use, and the dialog's length.
 */
export interface FidelityLevel {
  level: 1 | 2 | 3 | 4 | 5;
  resolution: string;
  /** What an entity's answer holds at this resolution (each level adds to the one below). */
  adds: string[];
  /** Turns of dialog per timepoint under M11. */
  dialogTurns: number;
  /** Words of an entity's summary. */
  summaryWords: number;
  /** Micro-dollars: a run's allowance runs from `band[0]` (the simplest plan) to `band[1]` (the most complex). */
  band: [number, number];
  /** No single call may ask for more output tokens than this, whatever the allowance. */
  maxTokensCap: number;
}

export const FIDELITY: Record<1 | 2 | 3 | 4 | 5, FidelityLevel> = {
  1: {
    level: 1,
    resolution: 'compact state',
    adds: ['mood', 'influence, resolve, resources', 'an 8-word label'],
    dialogTurns: 2,
    summaryWords: 8,
    band: [150_000, 250_000],
    maxTokensCap: 1024,
  },
  2: {
    level: 2,
    resolution: 'state and action',
    adds: ['one action', 'the knowledge it draws on', 'a one-sentence summary'],
    dialogTurns: 3,
    summaryWords: 20,
    band: [250_000, 400_000],
    maxTokensCap: 2048,
  },
  3: {
    level: 3,
    resolution: 'intentions and communication',
    adds: ['an intention', 'what it tells whom', 'its stance towards each other entity'],
    dialogTurns: 4,
    summaryWords: 35,
    band: [400_000, 580_000],
    maxTokensCap: 4096,
  },
  4: {
    level: 4,
    resolution: 'inner reasoning',
    adds: ['its reasoning', 'a paragraph of description'],
    dialogTurns: 8,
    summaryWords: 50,
    band: [580_000, 780_000],
    maxTokensCap: 8192,
  },
  5: {
    level: 5,
    resolution: 'full dialog and monologue',
    adds: ['an inner monologue', 'full dialog'],
    dialogTurns: 12,
    summaryWords: 70,
    band: [780_000, 1_000_000],
    maxTokensCap: 16_384,
  },
};

export type FidelityValue = keyof typeof FIDELITY;
export const fidelityOf = (level: number): FidelityLevel => FIDELITY[Math.min(5, Math.max(1, Math.round(level))) as FidelityValue];
