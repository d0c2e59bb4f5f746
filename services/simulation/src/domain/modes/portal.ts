import { type Scenario, timepointWeight } from '../plan.ts';
import { type AntecedentsReply, AntecedentsReplySchema } from '../replies.ts';
import { askValidated, type StepContext } from '../step-calls.ts';
import { pick, randomFor } from '../synth.ts';
import { resolveTimepoint } from '../timepoint.ts';
import { createWorld, round, type World } from '../world.ts';
import type { ModeAlgorithm, StepReport } from './types.ts';

/** Candidate antecedents asked for per path per level. */
const CANDIDATES = 3;

interface Candidate {
  id: string;
  depth: number;
  /** The later moment this one leads to (`outcome` or a candidate of the level above). */
  parent: string;
  time: string;
  description: string;
  plausibility: number;
  coherence: number;
  score: number;
  rests_on: string[];
  states: Record<string, { mood: string; summary: string }>;
  kept: boolean;
  step: number;
}

interface PortalState {
  world: World;
  depth: number;
  beam: number;
  levels: Candidate[][];
  /** Set by the last step: the surviving histories, best first. */
  paths: Array<{ rank: number; score: number; candidates: string[] }> | null;
}

const settings = (scenario: { modes: { portal?: { depth?: number; beam?: number } }; timepoints: unknown[] }) => ({
  depth: scenario.modes.portal?.depth ?? Math.min(3, scenario.timepoints.length - 1),
  beam: scenario.modes.portal?.beam ?? 2,
});

const jaccard = (a: string[], b: string[]) => {
  const union = new Set([...a, ...b]);
  return union.size ? a.filter((item) => b.includes(item)).length / union.size : 0;
};

/**
 * PORTAL: from a fixed outcome backwards. The outcome is resolved first; then each level asks, for every
 * surviving path, which earlier moments could have led to it, scores each (its plausibility times its
 * coherence with what it leads to) and keeps the best `beam` across the level. The last step orders the
 * surviving paths forwards and says where they diverge.
 */
export const portal: ModeAlgorithm<PortalState> = {
  mode: 'PORTAL',
  size(scenario, shape) {
    const { depth, beam } = scenario ? settings(scenario) : { depth: 3, beam: 2 };
    // The outcome, one antecedents call (weight 2) for the first level and `beam` for each further one.
    return { steps: depth + 2, weightedCalls: timepointWeight(shape) + 2 * (1 + (depth - 1) * beam) };
  },
  init: (_plan, scenario) => ({ world: createWorld(scenario), ...settings(scenario), levels: [], paths: null }),
  async step(index, state, ctx, scenario) {
    if (index === 0) return resolveOutcome(state, ctx, scenario);
    if (index <= state.depth) return expandLevel(index, state, ctx, scenario);
    return readPaths(state);
  },
  assemble(state, scenario) {
    const paths = state.paths ?? [];
    const divergence: Array<{ depth: number; paths: number[]; branches: string[] }> = [];
    for (let a = 0; a < paths.length; a += 1) {
      for (let b = a + 1; b < paths.length; b += 1) {
        // Walking back from the outcome, the first level at which the two histories differ.
        const first = [...paths[a]!.candidates].reverse();
        const second = [...paths[b]!.candidates].reverse();
        const at = first.findIndex((id, level) => id !== second[level]);
        if (at >= 0) divergence.push({ depth: at + 1, paths: [paths[a]!.rank, paths[b]!.rank], branches: [first[at]!, second[at]!] });
      }
    }
    return {
      portal: {
        outcome: outcomeOf(scenario),
        depth: state.depth,
        beam: state.beam,
        levels: state.levels.map((level, index) => ({ depth: index + 1, candidates: level })),
        paths: paths.map((path) => ({ ...path, forward: [...path.candidates, 'outcome'] })),
        divergence,
      },
    };
  },
  worlds: (state) => [{ name: 'main', world: state.world }],
};

const outcomeOf = (scenario: Scenario) => scenario.modes.portal?.outcome ?? scenario.timepoints.at(-1)!.label;

/** The first step: the fixed outcome, resolved as the world's first timepoint. */
async function resolveOutcome(state: PortalState, ctx: StepContext, scenario: Scenario): Promise<StepReport> {
  const last = scenario.timepoints.at(-1)!;
  const outcome = outcomeOf(scenario);
  const record = await resolveTimepoint(
    state.world,
    {
      id: 'outcome',
      index: scenario.timepoints.length - 1,
      label: outcome,
      time: last.time,
      hour: last.hour,
      follows: null,
      guidance: 'This outcome is fixed: it happened.',
    },
    ctx,
  );
  return { kind: 'outcome', label: outcome, detail: { timepoint: record.id } };
}

/** One level back: the antecedents of every kept candidate of the level above (the outcome's, first), the best `beam` kept. */
async function expandLevel(depth: number, state: PortalState, ctx: StepContext, scenario: Scenario): Promise<StepReport> {
  const frontier = depth === 1 ? [null] : state.levels[depth - 2]!.filter((candidate) => candidate.kept);
  const timepoint = scenario.timepoints[Math.max(0, scenario.timepoints.length - 1 - depth)]!;
  const expansions = await Promise.all(frontier.map((child, position) => antecedents(state, ctx, scenario, { depth, child, position, timepoint })));
  const level = expansions.flat().sort((a, b) => b.score - a.score || a.id.localeCompare(b.id));
  level.slice(0, state.beam).forEach((candidate) => (candidate.kept = true));
  state.levels.push(level);
  return {
    kind: 'antecedents',
    label: `level ${depth}: ${level.length} candidates, ${Math.min(state.beam, level.length)} kept`,
    detail: { depth, candidates: level.length, kept: level.filter((candidate) => candidate.kept).map((candidate) => candidate.id) },
  };
}

interface Expansion {
  depth: number;
  /** The candidate whose antecedents are asked for; null for the outcome's. */
  child: Candidate | null;
  position: number;
  timepoint: Scenario['timepoints'][number];
}

/** The model's candidate antecedents of one later moment, each scored by its plausibility and its coherence with that moment. */
async function antecedents(state: PortalState, ctx: StepContext, scenario: Scenario, { depth, child, position, timepoint }: Expansion): Promise<Candidate[]> {
  const outcome = outcomeOf(scenario);
  const facts = Object.keys(state.world.facts);
  const later = child ? child.description : outcome;
  const prompt = JSON.stringify({
    outcome,
    later_moment: later,
    earlier_time: timepoint.time,
    entities: state.world.entities.map((entity) => ({ id: entity.id, name: entity.name, role: entity.role })),
    facts: facts.map((id) => ({ id, text: state.world.facts[id]!.text })),
    answer: `${CANDIDATES} candidate earlier moments, each {description, plausibility 0-1, rests_on: fact ids, states: {entity id: {mood, summary}}}`,
  });
  const { value: reply } = await askValidated(
    ctx,
    `antecedents ${depth}.${position + 1}`,
    {
      action: 'antecedents',
      resolution: ctx.plan.fidelity,
      system:
        'You reason backwards from a known outcome: propose earlier moments that could have led to the later one. Answer with one JSON object only; cite only the listed fact ids.',
      prompt,
      schema: AntecedentsReplySchema,
      offline: (attempt) => synthAntecedents(ctx.plan.seed, `${depth}.${child?.id ?? 'outcome'}.${attempt}`, later, timepoint.label, state.world, facts),
    },
    // An antecedent may rest only on facts of this world (the validator's unknown-fact rule).
    (value) =>
      value.candidates.flatMap((candidate) =>
        candidate.rests_on
          .filter((id) => !state.world.facts[id])
          .map((id) => ({ entity: 'portal', fact: id, where: 'rests_on', reason: 'unknown fact' as const })),
      ),
  );
  const childFacts = child ? child.rests_on : (state.world.timepoints[0]?.states.flatMap((entityState) => entityState.uses_knowledge) ?? []);
  return reply.candidates.map((candidate, order): Candidate => {
    const coherence = round(0.5 + 0.5 * jaccard(candidate.rests_on, childFacts), 3);
    return {
      id: `d${depth}-${child ? `${child.id.replace(/^d\d+-/, '')}-` : ''}${order + 1}`,
      depth,
      parent: child?.id ?? 'outcome',
      time: timepoint.time,
      description: candidate.description,
      plausibility: candidate.plausibility,
      coherence,
      score: round(candidate.plausibility * coherence * (child ? child.score : 1), 4),
      rests_on: candidate.rests_on,
      states: candidate.states,
      kept: false,
      step: ctx.step,
    };
  });
}

/** The last step: the surviving paths, read forwards from their earliest moment to the outcome. */
function readPaths(state: PortalState): StepReport {
  const byId = new Map(state.levels.flat().map((candidate) => [candidate.id, candidate]));
  const leaves = state.levels.at(-1)!.filter((candidate) => candidate.kept);
  state.paths = leaves.map((leaf, rank) => {
    const chain: string[] = [];
    for (let node: Candidate | undefined = leaf; node; node = byId.get(node.parent)) chain.push(node.id);
    return { rank: rank + 1, score: leaf.score, candidates: chain };
  });
  return { kind: 'paths', label: `${state.paths.length} paths to the outcome`, detail: { paths: state.paths.length } };
}

function synthAntecedents(seed: string, key: string, later: string, label: string, world: World, facts: string[]): AntecedentsReply {
  const random = randomFor(seed, 'portal', key);
  const people = world.entities.filter((entity) => entity.kind === 'person');
  return {
    candidates: Array.from({ length: CANDIDATES }, (_, index) => {
      const who = pick(random, people.length ? people : world.entities);
      const rests = facts.length ? [...new Set([pick(random, facts), pick(random, facts)])] : [];
      return {
        description: `${label}: ${who.name} ${['sets in motion', 'fails to prevent', 'quietly enables'][index]} what becomes "${later.slice(0, 80)}"`,
        plausibility: round(0.35 + random() * 0.6, 2),
        rests_on: rests,
        states: Object.fromEntries(
          world.entities
            .slice(0, 3)
            .map((entity) => [
              entity.id,
              { mood: pick(random, ['uneasy', 'confident', 'divided', 'unaware']), summary: `${entity.name} before ${label.toLowerCase()}` },
            ]),
        ),
      };
    }),
  };
}
