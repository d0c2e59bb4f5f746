import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { startSimulation, type SimulationHarness } from './harness.ts';

describe('simulation smoke', function () {
  let sim: SimulationHarness;
  before(async () => (sim = await startSimulation()));
  after(async () => sim?.stop());

  for (const t of ['athens-war-council', 'trial-of-socrates', 'congress-of-vienna', 'london-plague-year', 'peace-of-westphalia']) {
    it(`runs ${t}`, async () => {
      const reply = await sim.run({ template: t, fidelity: 3 });
      assert.equal(reply.body.status, 'completed', JSON.stringify(reply.body));
      const result = await sim.result(reply.body.id);
      writeFileSync(`/tmp/simtpl/${t}.json`, JSON.stringify(result, null, 1));
    });
  }
  it('runs a prompt', async () => {
    const reply = await sim.run({ prompt: 'Caesar decides whether to cross the Rubicon while Pompey gathers the Senate.', fidelity: 1 });
    assert.equal(reply.body.status, 'completed', JSON.stringify(reply.body));
    writeFileSync(`/tmp/simtpl/prompt.json`, JSON.stringify(await sim.result(reply.body.id), null, 1));
  });
});
