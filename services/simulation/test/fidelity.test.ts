import assert from 'node:assert/strict';
import { templateEstimates } from '../src/domain/engine.ts';
import { FIDELITY } from '../src/domain/fidelity.ts';
import { TEMPLATE_DIRECTORY, TemplateCatalog } from '../src/domain/templates.ts';
import { MODES } from '../src/domain/vocabulary.ts';
import { type SimulationHarness, startSimulation } from './harness.ts';

const catalog = TemplateCatalog.load(TEMPLATE_DIRECTORY);

describe('simulation fidelity and price', function () {
  this.timeout(60_000);
  let sim: SimulationHarness;
  before(async () => (sim = await startSimulation()));
  after(async () => sim?.stop());

  it("every template's file lists what the estimator computes", () => {
    for (const template of catalog.list()) assert.deepEqual(template.cost_estimate_usd, templateEstimates(template), template.id);
  });

  it('every template in every mode at every fidelity is estimated between $0.15 and $1.00, rising with fidelity', async () => {
    for (const template of catalog.list()) {
      for (const mode of MODES) {
        let previous = 0;
        for (const fidelity of [1, 2, 3, 4, 5]) {
          const plan = sim.instance.simulations.plan({ template: template.id, mode, fidelity } as never, 'estimate');
          const usd = plan.allowanceMicros / 1e6;
          assert.ok(usd >= 0.15 && usd <= 1, `${template.id} ${mode} ${fidelity}: ${usd}`);
          assert.ok(usd > previous, `${template.id} ${mode}: fidelity ${fidelity} costs more`);
          previous = usd;
        }
      }
    }
    assert.deepEqual(
      Object.values(FIDELITY).map((level) => level.band[0]),
      [150_000, 250_000, 400_000, 580_000, 780_000],
    );
  });

  it('a higher fidelity costs more, uses more tokens and produces more, monotonically', async () => {
    const runs = [];
    for (const fidelity of [1, 2, 3, 4, 5]) {
      const reply = await sim.run({ template: 'constitutional-convention', fidelity }, 'fidelity');
      assert.equal(reply.body.status, 'completed', JSON.stringify(reply.body));
      runs.push(await sim.result(reply.body.id, 'fidelity'));
    }
    const size = (result: any) => JSON.stringify(result.timepoints).length;
    const turns = (result: any) => result.timepoints.reduce((sum: number, timepoint: any) => sum + timepoint.dialog.length, 0);
    const fields = (result: any) => Object.keys(result.timepoints[0].states[0]).length;
    for (let index = 1; index < runs.length; index += 1) {
      const [lower, higher] = [runs[index - 1], runs[index]];
      assert.ok(higher.cost.actual_usd > lower.cost.actual_usd, `fidelity ${index + 1} actual cost`);
      assert.ok(higher.cost.estimate_usd > lower.cost.estimate_usd, `fidelity ${index + 1} estimate`);
      assert.ok(higher.cost.tokens.output > lower.cost.tokens.output, `fidelity ${index + 1} output tokens`);
      assert.ok(size(higher) > size(lower), `fidelity ${index + 1} produces more`);
      assert.ok(turns(higher) > turns(lower), `fidelity ${index + 1} dialog turns`);
      assert.ok(fields(higher) >= fields(lower), `fidelity ${index + 1} entity fields`);
    }
    // The resolution ladder: compact state only at 1, an action from 2, intentions from 3, reasoning from 4, monologue at 5.
    const first = (result: any) => result.timepoints[0].states[0];
    assert.equal(first(runs[0]).action, null);
    assert.ok(first(runs[1]).action && !first(runs[1]).intention);
    assert.ok(first(runs[2]).intention && !first(runs[2]).reasoning);
    assert.ok(first(runs[3]).reasoning && !first(runs[3]).monologue);
    assert.ok(first(runs[4]).monologue);
    assert.deepEqual(
      runs.map((result) => result.resolution),
      Object.values(FIDELITY).map((level) => level.resolution),
    );
  });
});
