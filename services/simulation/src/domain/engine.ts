import { fidelityOf } from './fidelity.ts';
import { branching } from './modes/branching.ts';
import { cyclical } from './modes/cyclical.ts';
import { directorial } from './modes/directorial.ts';
import { forward } from './modes/forward.ts';
import { portal } from './modes/portal.ts';
import type { ModeAlgorithm, StepReport } from './modes/types.ts';
import { type Plan, type RunOptions, type Scenario, scenarioOf, shapeOf } from './plan.ts';
import { allowanceMicros, DEFAULT_MODEL } from './pricing.ts';
import { type PlanReply, PlanReplySchema } from './replies.ts';
import { askValidated, type StepContext } from './step-calls.ts';
import { pick, randomFor } from './synth.ts';
import type { Template } from './templates.ts';
import type { Mechanism, Mode } from './vocabulary.ts';
import { round, type World } from './world.ts';

export const ALGORITHMS: Record<Mode, ModeAlgorithm<unknown>> = {
  FORWARD: forward as ModeAlgorithm<unknown>,
  PORTAL: portal as ModeAlgorithm<unknown>,
  BRANCHING: branching as ModeAlgorithm<unknown>,
  CYCLICAL: cyclical as ModeAlgorithm<unknown>,
  DIRECTORIAL: directorial as ModeAlgorithm<unknown>,
};

/** What a run carries between steps (persisted after each). */
export interface EngineState {
  scenario: Scenario | null;
  mode: unknown;
  refusals: StepContext['refusals'];
}

/** Everything about a run decided before it starts: its scenario, its steps, its allowance. */
export function planRun(seed: string, template: Template | null, options: RunOptions): Plan {
  const scenario = template ? scenarioOf(template) : null;
  const mechanisms = new Set<Mechanism>(options.mechanisms);
  const shape = shapeOf(scenario, mechanisms);
  const size = ALGORITHMS[options.mode].size(scenario, shape);
  const steps = size.steps + (scenario ? 0 : 1);
  const weightedCalls = size.weightedCalls + shape.planWeight;
  const allowance = allowanceMicros(options.fidelity, weightedCalls);
  return {
    ...options,
    seed,
    template: template?.id ?? null,
    scenario,
    steps,
    weightedCalls,
    allowanceMicros: allowance,
    shareMicros: allowance / weightedCalls,
  };
}

export const initialState = (plan: Plan): EngineState => ({
  scenario: plan.scenario,
  mode: plan.scenario ? ALGORITHMS[plan.mode].init(plan, plan.scenario) : null,
  refusals: [],
});

/** Runs step `index` of the run on `state` (mutated; the runner hands it a copy). */
export async function runStep(plan: Plan, state: EngineState, index: number, ctx: StepContext): Promise<StepReport> {
  if (!state.scenario) {
    state.scenario = await planScenario(plan, ctx);
    state.mode = ALGORITHMS[plan.mode].init(plan, state.scenario);
    return {
      kind: 'plan',
      label: `planned: ${state.scenario.title}`,
      detail: { entities: state.scenario.entities.length, timepoints: state.scenario.timepoints.length },
    };
  }
  return ALGORITHMS[plan.mode].step(index - (plan.scenario ? 0 : 1), state.mode, ctx, state.scenario);
}

const PLANNER = `You turn a scenario description into a simulation plan: its entities (3 to 6, at least one place, object, force or institution), the facts each knows at the start (holders by entity index), and 3 to 5 timepoints. Answer with one JSON object only.`;

/** A prompt-only run's first step: the scenario, from the prompt. */
async function planScenario(plan: Plan, ctx: StepContext): Promise<Scenario> {
  const prompt = plan.prompt ?? '';
  const { value } = await askValidated(ctx, 'plan', {
    action: 'plan',
    resolution: plan.fidelity,
    system: PLANNER,
    prompt: JSON.stringify({ scenario: prompt, mode: plan.mode }),
    schema: PlanReplySchema,
    offline: () => synthPlan(plan.seed, prompt),
  });
  return scenarioFromPlan(value, plan);
}

const COMMON = new Set([
  'The',
  'What',
  'When',
  'While',
  'After',
  'Before',
  'If',
  'In',
  'On',
  'At',
  'As',
  'How',
  'Why',
  'Who',
  'And',
  'But',
  'Then',
  'This',
  'That',
  'There',
  'Their',
  'His',
  'Her',
]);

/** Capitalised words of the prompt (not common sentence openers) become its people; roles fill the rest. */
function synthPlan(seed: string, prompt: string): PlanReply {
  const random = randomFor(seed, 'plan');
  const names = [...new Set([...prompt.matchAll(/\b([A-Z][a-z]{2,}(?:\s[A-Z][a-z]{2,})?)\b/g)].map((match) => match[1]!))]
    .filter((name) => !COMMON.has(name))
    .slice(0, 3);
  const roles = ['the leader who must decide', 'a rival with a different plan', 'an adviser who knows more than is said', 'a newcomer with nothing to lose'];
  const people = [...names, 'The Adviser', 'The Rival', 'The Envoy'].slice(0, 3);
  const subject = prompt.split(/[.!?]/)[0]!.slice(0, 120) || 'the matter at hand';
  return {
    title: subject,
    place: 'where the scenario unfolds',
    era: 'as the prompt describes',
    entities: [
      ...people.map((name, index) => ({
        name,
        role: roles[index]!,
        kind: 'person' as const,
        importance: index === 0 ? ('principal' as const) : ('supporting' as const),
        goals: [`settle ${subject.toLowerCase()} on their own terms`],
      })),
      { name: 'The Council', role: 'the body whose vote decides', kind: 'group' as const, importance: 'minor' as const, goals: ['keep order'] },
      { name: 'Rumour', role: 'what everyone half-knows', kind: 'force' as const, importance: 'minor' as const, goals: ['spread'] },
    ],
    facts: [
      { fact: `The question is: ${subject}.`, holders: [0, 1, 2, 3] },
      { fact: `${people[0]} has already chosen, privately.`, holders: [0] },
      { fact: `${people[1]} has allies the others do not know of.`, holders: [1] },
    ],
    timepoints: ['The question is raised', 'Positions harden', 'A private bargain', 'The decision', 'The aftermath'].map((label, index) => ({
      label,
      time: `day ${index + 1}`,
      hour: pick(random, [9, 11, 15, 19, 22]),
    })),
  };
}

const slug = (text: string, index: number) =>
  `${
    text
      .toLowerCase()
      .replace(/[^a-z0-9]+/g, '-')
      .replace(/^-|-$/g, '')
      .slice(0, 40) || 'entity'
  }-${index + 1}`;

function scenarioFromPlan(reply: PlanReply, plan: Plan): Scenario {
  const ids = reply.entities.map((entity, index) => slug(entity.name, index));
  const entities = reply.entities.map((entity, index) => ({ ...entity, id: ids[index]!, state: { influence: 0.5, resolve: 0.5, resources: 0.5 } }));
  const relationships = [];
  for (let a = 0; a < ids.length; a += 1)
    for (let b = a + 1; b < ids.length; b += 1) relationships.push({ a: ids[a]!, b: ids[b]!, trust: 0.5, affinity: 0.5, tension: 0.3 });
  const knowledge = reply.facts.map((fact, index) => ({
    id: `k${index + 1}`,
    fact: fact.fact,
    holders: [...new Set(fact.holders.filter((holder) => holder < ids.length).map((holder) => ids[holder]!))],
    secret: false,
  }));
  const usable = knowledge.filter((fact) => fact.holders.length > 0);
  const timepoints = reply.timepoints.map((timepoint) => ({ ...timepoint }));
  return {
    id: 'prompt',
    title: reply.title,
    description: plan.prompt ?? reply.title,
    mode: plan.mode,
    setting: { place: reply.place, era: reply.era },
    entities,
    knowledge: usable,
    relationships,
    timepoints,
    mechanisms: plan.mechanisms,
    modes: {
      portal: { outcome: timepoints.at(-1)!.label },
      branching: { branch_at: Math.max(1, Math.floor(timepoints.length / 2)), intervention: `What if ${reply.entities[0]!.name} had acted first?` },
      cyclical: { cycles: 3, phases: timepoints.slice(0, 3).map((timepoint) => timepoint.label) },
      directorial: { premise: reply.title },
    },
  };
}

const mean = (values: number[]) => (values.length ? values.reduce((sum, value) => sum + value, 0) / values.length : 0);

/**
 * The result of a run from its state: entities, the mode's own section, every timepoint, the relationship
 * graph over time, causal provenance (each edge named by the step that made it), knowledge and its
 * exposures, confidence per item and per run, and the validator's refusals.
 */
export function assembleResult(plan: Plan, state: EngineState): Record<string, unknown> {
  const scenario = state.scenario;
  if (!scenario || state.mode === null) return { title: null, entities: [], timepoints: [], confidence: { run: 0 } };
  const algorithm = ALGORITHMS[plan.mode];
  const worlds = algorithm.worlds(state.mode);
  const entities = new Map<string, World['entities'][number]>();
  for (const { world } of worlds) for (const entity of world.entities) entities.set(entity.id, entity);
  const timepoints = worlds.flatMap(({ name, world }) => world.timepoints.map((timepoint) => ({ world: name, ...timepoint })));

  const series = new Map<string, { a: string; b: string; series: Array<Record<string, unknown>> }>();
  for (const timepoint of timepoints) {
    for (const pair of timepoint.relationships) {
      const key = `${pair.a}|${pair.b}`;
      let entry = series.get(key);
      if (!entry) series.set(key, (entry = { a: pair.a, b: pair.b, series: [] }));
      entry.series.push({ timepoint: timepoint.id, world: timepoint.world, trust: pair.trust, affinity: pair.affinity, tension: pair.tension });
    }
  }

  const temporal = timepoints
    .filter((timepoint) => timepoint.follows)
    .map((timepoint) => ({ from: timepoint.follows, to: timepoint.id, world: timepoint.world, step: timepoint.step }));
  const causal = timepoints.flatMap((timepoint) =>
    timepoint.events.flatMap((event) =>
      (event.caused_by ?? []).map((cause) => ({
        from: cause,
        to: event.id,
        timepoint: timepoint.id,
        step: event.step,
        ...(event.modality ? { modality: event.modality } : {}),
      })),
    ),
  );
  const knowledgeEdges = worlds.flatMap(({ name, world }) =>
    world.exposures
      .filter((exposure) => exposure.source)
      .map((exposure) => ({
        from: exposure.source,
        to: exposure.entity,
        fact: exposure.fact,
        channel: exposure.channel,
        timepoint: exposure.timepoint,
        step: exposure.step,
        world: name,
      })),
  );

  const itemConfidences = timepoints.flatMap((timepoint) => [
    ...timepoint.states.map((state) => state.confidence),
    ...timepoint.events.map((event) => event.confidence),
    ...timepoint.dialog.map((turn) => turn.confidence),
  ]);
  return {
    title: scenario.title,
    setting: scenario.setting,
    entities: [...entities.values()],
    ...algorithm.assemble(state.mode, scenario),
    timepoints,
    relationships: { pairs: [...series.values()] },
    provenance: { temporal_edges: temporal, causal_edges: causal, knowledge_edges: knowledgeEdges },
    knowledge: worlds.map(({ name, world }) => ({ world: name, facts: Object.values(world.facts), exposures: world.exposures })),
    confidence: {
      run: round(mean(itemConfidences), 3),
      by_timepoint: timepoints.map((timepoint) => ({ timepoint: timepoint.id, confidence: timepoint.confidence })),
    },
    validation: { exposure_refusals: state.refusals },
    resolution: fidelityOf(plan.fidelity).resolution,
  };
}

/** A template's estimate in dollars at each fidelity, in its own mode with its own mechanisms (the figures its file lists). */
export function templateEstimates(template: Template): Record<'1' | '2' | '3' | '4' | '5', number> {
  const at = (fidelity: number) =>
    planRun('estimate', template, {
      mode: template.mode,
      fidelity,
      mechanisms: template.mechanisms as Mechanism[],
      prompt: null,
      llm: {},
      baseModel: DEFAULT_MODEL,
    }).allowanceMicros / 1e6;
  return { '1': at(1), '2': at(2), '3': at(3), '4': at(4), '5': at(5) };
}
