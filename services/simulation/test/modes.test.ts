import assert from 'node:assert/strict';
import { TEMPLATE_DIRECTORY, TemplateCatalog } from '../src/domain/templates.ts';
import { MODES } from '../src/domain/vocabulary.ts';
import { type SimulationHarness, startSimulation } from './harness.ts';

const SECTIONS = { FORWARD: 'timeline', PORTAL: 'portal', BRANCHING: 'branching', CYCLICAL: 'cycles', DIRECTORIAL: 'acts' } as const;
const catalog = TemplateCatalog.load(TEMPLATE_DIRECTORY);

describe('simulation modes', function () {
  this.timeout(120_000);
  let sim: SimulationHarness;
  const results = new Map<string, any>();
  before(async () => (sim = await startSimulation()));
  after(async () => sim?.stop());

  async function run(body: Record<string, unknown>) {
    const reply = await sim.run(body, 'modes');
    assert.equal(reply.body.status, 'completed', JSON.stringify(reply.body));
    return sim.result(reply.body.id, 'modes');
  }

  for (const mode of MODES) {
    describe(mode, () => {
      for (const template of catalog.list().filter((candidate) => candidate.mode === mode)) {
        it(`runs ${template.id} to the end, with the ${SECTIONS[mode]} section and no other mode's`, async () => {
          const result = await run({ template: template.id, fidelity: 1 });
          results.set(template.id, result);
          assert.ok(result[SECTIONS[mode]], `${mode} has ${SECTIONS[mode]}`);
          for (const [other, section] of Object.entries(SECTIONS)) if (other !== mode) assert.equal(result[section], undefined, `${mode} has no ${section}`);
          assert.ok(result.timepoints.length >= 1);
          for (const timepoint of result.timepoints) assert.ok(timepoint.states.length > 0, timepoint.id);
        });
      }
    });
  }

  it('FORWARD: each timepoint is caused by the one before it', async () => {
    const result = await run({ template: 'athens-war-council', mode: 'FORWARD', fidelity: 2 });
    const ids = result.timepoints.map((timepoint: any) => timepoint.id);
    assert.deepEqual(
      result.timeline.map((entry: any) => entry.caused_by),
      [null, ...ids.slice(0, -1)],
    );
    assert.deepEqual(
      result.provenance.temporal_edges.map((edge: any) => [edge.from, edge.to]),
      ids.slice(1).map((id: string, index: number) => [ids[index], id]),
    );
    assert.ok(result.timeline.slice(1).every((entry: any) => entry.carried_from.length > 0));
  });

  it('PORTAL: scored, pruned candidates per level and several paths to the outcome, with where they diverge', async () => {
    const result = await run({ template: 'peace-of-westphalia', fidelity: 2 });
    const { portal } = result;
    assert.equal(portal.levels.length, portal.depth);
    for (const level of portal.levels) {
      assert.ok(level.candidates.length >= 3);
      assert.equal(level.candidates.filter((candidate: any) => candidate.kept).length, Math.min(portal.beam, level.candidates.length));
      const scores = level.candidates.map((candidate: any) => candidate.score);
      assert.deepEqual(
        scores,
        [...scores].sort((a: number, b: number) => b - a),
        'ranked by score',
      );
      const kept = level.candidates.filter((candidate: any) => candidate.kept).map((candidate: any) => candidate.score);
      const pruned = level.candidates.filter((candidate: any) => !candidate.kept).map((candidate: any) => candidate.score);
      assert.ok(Math.min(...kept) >= Math.max(...pruned), 'the pruned scored no better than the kept');
    }
    assert.ok(portal.paths.length >= 2, 'several paths');
    for (const path of portal.paths) {
      assert.equal(path.forward.at(-1), 'outcome');
      assert.equal(path.candidates.length, portal.depth);
    }
    assert.ok(portal.divergence.length >= 1);
    assert.ok(portal.divergence.every((point: any) => point.branches[0] !== point.branches[1]));
    assert.equal(result.timepoints[0].id, 'outcome');
  });

  it('BRANCHING: a counterfactual beside the baseline from the branch point, and their metrics compared', async () => {
    const result = await run({ template: 'cuban-missile-crisis', fidelity: 2 });
    const { branching } = result;
    assert.equal(branching.branch_point.timepoint, 't4');
    assert.deepEqual(branching.baseline, ['t1', 't2', 't3', 't4', 't5', 't6']);
    assert.deepEqual(branching.counterfactual, ['t1', 't2', 't3', 'cf-t4', 'cf-t5', 'cf-t6']);
    assert.match(branching.intervention, /U-2/);
    const counterfactual = result.timepoints.filter((timepoint: any) => timepoint.world === 'counterfactual');
    assert.deepEqual(
      counterfactual.map((timepoint: any) => timepoint.id),
      ['cf-t4', 'cf-t5', 'cf-t6'],
    );
    assert.equal(counterfactual[0].follows, 't3', 'the branch grows from the baseline');
    assert.ok(counterfactual.every((timepoint: any) => timepoint.direction.timeline === 'counterfactual'));
    const metrics = branching.comparison.metrics.map((row: any) => row.metric);
    for (const metric of ['mean_influence', 'mean_resolve', 'mean_resources', 'mean_trust', 'mean_tension', 'events', 'exposures'])
      assert.ok(metrics.includes(metric), metric);
    for (const row of branching.comparison.metrics) assert.ok(Math.abs(row.delta - (row.counterfactual - row.baseline)) < 1e-9);
    assert.ok(branching.comparison.divergent_entities.length > 0);
  });

  it('CYCLICAL: the same phases recur each cycle, escalating, and the loop closes', async () => {
    const result = await run({ template: 'london-plague-year', fidelity: 2 });
    assert.equal(result.cycles.length, 3);
    assert.deepEqual(
      result.cycles.map((cycle: any) => cycle.phases.length),
      [4, 4, 4],
    );
    const escalation = result.cycles.map((cycle: any) => cycle.escalation);
    assert.ok(escalation[0] < escalation[1] && escalation[1] < escalation[2], 'each cycle escalates');
    const labels = (cycle: number) =>
      result.timepoints.filter((timepoint: any) => timepoint.direction.cycle === cycle).map((timepoint: any) => timepoint.label);
    assert.deepEqual(labels(1), labels(2));
    assert.deepEqual(labels(2), labels(3));
    assert.ok(result.recurring_elements.length > 0, 'elements recur');
    assert.ok(result.recurring_elements.every((element: any) => element.occurrences.length >= 2));
    assert.deepEqual([result.loop.from, result.loop.to, result.loop.closes], ['c3-p4', 'c1-p1', true]);
  });

  it('DIRECTORIAL: a five-act plan whose tension shapes each step', async () => {
    const result = await run({ template: 'fall-of-constantinople', fidelity: 2 });
    assert.deepEqual(
      result.acts.map((act: any) => act.name),
      ['Exposition', 'Rising action', 'Climax', 'Falling action', 'Resolution'],
    );
    assert.equal(result.tension_curve.length, 6);
    const climax = result.acts[2].target_tension;
    assert.ok(climax > result.acts[0].target_tension && climax > result.acts[4].target_tension, 'the climax is the peak');
    for (const point of result.tension_curve) {
      const timepoint = result.timepoints.find((candidate: any) => candidate.id === point.timepoint);
      assert.equal(timepoint.direction.target_tension, point.target, 'each step was run at its target');
      assert.ok(point.realised >= 0 && point.realised <= 1);
    }
    // The same scenario run as a plain FORWARD timeline has no act structure at all.
    const plain = await run({ template: 'fall-of-constantinople', mode: 'FORWARD', fidelity: 2 });
    assert.equal(plain.acts, undefined);
    assert.ok(plain.timepoints.every((timepoint: any) => timepoint.direction === undefined));
  });
});
