import type { Plan, Scenario, Shape } from '../plan.ts';
import type { StepContext } from '../step-calls.ts';
import type { Mode } from '../vocabulary.ts';
import type { World } from '../world.ts';

/** What a step reports as it completes (progress events and the run's step list). */
export interface StepReport {
  kind: string;
  label: string;
  detail: Record<string, unknown>;
}

/**
 * One temporal mode: its own algorithm over plain-JSON state, one step at a time, so the runner can
 * persist after each step, report it, stop or cancel between steps, and resume after a restart.
 */
export interface ModeAlgorithm<S> {
  mode: Mode;
  /** Steps and weighted model calls of a scenario of this shape (the run's estimate rests on them). */
  size(scenario: Scenario | null, shape: Shape): { steps: number; weightedCalls: number };
  init(plan: Plan, scenario: Scenario): S;
  step(index: number, state: S, ctx: StepContext, scenario: Scenario): Promise<StepReport>;
  /** The mode's own section of the result (present in no other mode's). */
  assemble(state: S, scenario: Scenario): Record<string, unknown>;
  /** The worlds whose timepoints, relationships and knowledge the result reports, by name. */
  worlds(state: S): Array<{ name: string; world: World }>;
}
