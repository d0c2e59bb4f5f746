import type { SamplingParams } from '@tempora/kit/providers';
import type { Template } from './templates.ts';
import { isAnimate, type Mechanism, type Mode } from './vocabulary.ts';

/** What a run works from: a template, or the scenario the plan step made from a prompt (same shape). */
export type Scenario = Omit<Template, 'cost_estimate_usd' | 'tier' | 'domain'> & { domain?: Template['domain'] };

/** A prompt-only run plans this many entities and timepoints (its estimate is made before they exist). */
export const PROMPT_SHAPE = { entities: 5, animate: 4, timepoints: 5 };

export interface RunOptions {
  mode: Mode;
  fidelity: number;
  mechanisms: Mechanism[];
  prompt: string | null;
  llm: SamplingParams & { system_prompt_prefix?: string; system_prompt_suffix?: string };
  /** The fidelity table's model, or the request's / the server's replacement. */
  baseModel: string;
}

/** Everything decided before a run starts; stored with it and never changed (its estimate rests on it). */
export interface Plan extends RunOptions {
  seed: string;
  template: string | null;
  /** Null until the plan step of a prompt-only run. */
  scenario: Scenario | null;
  steps: number;
  weightedCalls: number;
  allowanceMicros: number;
  /** Micro-dollars of allowance per unit of call weight. */
  shareMicros: number;
}

/** The size of a scenario as the mode algorithms count calls. */
export interface Shape {
  /** Entities that act at each timepoint. */
  actors: number;
  timepoints: number;
  /** Weight of the scene call at each timepoint (0 when no mechanism needs it). */
  sceneWeight: number;
  /** Weight of a planning call before the first step (prompt-only runs). */
  planWeight: number;
}

/** The scene call writes atmosphere (M10), dialog (M11), causes (M7) and spawned entities (M9). */
export const needsScene = (mechanisms: ReadonlySet<Mechanism>) => ['M7', 'M9', 'M10', 'M11'].some((id) => mechanisms.has(id as Mechanism));

export function shapeOf(scenario: Scenario | null, mechanisms: ReadonlySet<Mechanism>): Shape {
  const m16 = mechanisms.has('M16');
  const actors = scenario ? scenario.entities.filter((entity) => m16 || isAnimate(entity.kind)).length : m16 ? PROMPT_SHAPE.entities : PROMPT_SHAPE.animate;
  return {
    actors,
    timepoints: scenario ? scenario.timepoints.length : PROMPT_SHAPE.timepoints,
    sceneWeight: needsScene(mechanisms) ? 2 : 0,
    planWeight: scenario ? 0 : 2,
  };
}

/** Weight of resolving one timepoint: an entity call per actor and the scene call. */
export const timepointWeight = (shape: Shape) => shape.actors + shape.sceneWeight;

export function scenarioOf(template: Template): Scenario {
  const { cost_estimate_usd: _cost, tier: _tier, ...scenario } = template;
  return scenario;
}
