/** The five temporal modes (platform-interface.md, "Simulation service"). */
export const MODES = ['FORWARD', 'PORTAL', 'BRANCHING', 'CYCLICAL', 'DIRECTORIAL'] as const;
export type Mode = (typeof MODES)[number];

/**
 * Mechanisms M1–M19: the spec names them only; docs/simulation.md defines each and the effect a run's
 * output shows when it is on.
 */
export const MECHANISMS = {
  M1: 'heterogeneous fidelity',
  M2: 'progressive training',
  M3: 'exposure events',
  M4: 'constraint enforcement',
  M5: 'lazy resolution',
  M6: 'compressed entity state',
  M7: 'causal chains',
  M8: 'embodied states',
  M9: 'on-demand entities',
  M10: 'scene atmosphere',
  M11: 'dialog synthesis',
  M12: 'counterfactual branching',
  M13: 'relationship evolution',
  M14: 'circadian patterns',
  M15: 'prospection',
  M16: 'animistic entities',
  M17: 'modal causality',
  M18: 'model selection per action',
  M19: 'information asymmetry',
} as const;
export type Mechanism = keyof typeof MECHANISMS;
export const MECHANISM_IDS = Object.keys(MECHANISMS) as Mechanism[];

/** Persons and groups act in every run; the other kinds act only under M16 (animistic entities). */
export const ENTITY_KINDS = ['person', 'group', 'institution', 'place', 'object', 'force'] as const;
export type EntityKind = (typeof ENTITY_KINDS)[number];
export const isAnimate = (kind: EntityKind) => kind === 'person' || kind === 'group';

export const IMPORTANCE = ['principal', 'supporting', 'minor'] as const;
export type Importance = (typeof IMPORTANCE)[number];

/** The numeric state every entity carries, each in [0, 1] (M4 holds them there). */
export const STATE_VARIABLES = ['influence', 'resolve', 'resources'] as const;
export type StateVariable = (typeof STATE_VARIABLES)[number];
