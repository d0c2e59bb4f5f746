import assert from 'node:assert/strict';
import { MECHANISM_IDS } from '../src/domain/vocabulary.ts';
import { type SimulationHarness, startSimulation } from './harness.ts';

/**
 * Each mechanism against the same run without it: London's plague year as twelve escalating timepoints
 * (one of them at one in the morning with only three entities on stage) at fidelity 3, same seed.
 */
const RUN = { template: 'london-plague-year', mode: 'CYCLICAL', fidelity: 3, seed: 'mechanisms' };

const states = (result: any) => result.timepoints.flatMap((timepoint: any) => timepoint.states);
const events = (result: any) => result.timepoints.flatMap((timepoint: any) => timepoint.events);
const inRange = (state: any) => Object.values(state.vars).every((value: any) => value >= 0 && value <= 1);
const animate = new Set(['pepys', 'lord-mayor', 'searcher', 'physician']);

/** What each mechanism does that a run without it does not show. */
const EFFECTS: Record<string, (result: any) => boolean> = {
  M1: (result) => states(result).some((state: any) => state.resolution < 3) && states(result).some((state: any) => state.resolution === 3),
  M2: (result) => {
    const pepys = states(result).filter((state: any) => state.entity === 'pepys');
    return (
      pepys.every((state: any) => state.training) &&
      pepys.at(-1).training.appearances > pepys[0].training.appearances &&
      pepys.at(-1).confidence > pepys[0].confidence
    );
  },
  M3: (result) =>
    result.provenance.knowledge_edges.length > 0 &&
    result.provenance.knowledge_edges.some((edge: any) => edge.channel === 'told' || edge.channel === 'witnessed'),
  M4: (result) => states(result).every(inRange) && result.timepoints.some((timepoint: any) => timepoint.constraint_repairs?.length > 0),
  M5: (result) => states(result).some((state: any) => !state.resolved && state.mood !== 'asleep'),
  M6: (result) => states(result).some((state: any) => state.compression && state.compression.compressed_tokens < state.compression.full_tokens),
  M7: (result) => result.provenance.causal_edges.length > 0 && events(result).some((event: any) => event.caused_by?.length),
  M8: (result) => states(result).every((state: any) => state.body && state.body.health >= 0 && state.body.fatigue >= 0),
  M9: (result) => result.entities.some((entity: any) => entity.spawned_at) && states(result).some((state: any) => state.entity.includes('spawned')),
  M10: (result) => result.timepoints.every((timepoint: any) => timepoint.atmosphere?.weather && timepoint.atmosphere.light),
  M11: (result) =>
    result.timepoints.every((timepoint: any) => timepoint.dialog.length >= 2 && timepoint.dialog.every((turn: any) => turn.speaker && turn.text)),
  M12: (result) => states(result).some((state: any) => state.alternative && state.alternative.probability > 0),
  M13: (result) => result.relationships.pairs.some((pair: any) => new Set(pair.series.map((point: any) => point.trust)).size > 1),
  M14: (result) => states(result).some((state: any) => state.circadian?.asleep) && states(result).every((state: any) => state.circadian),
  M15: (result) => states(result).some((state: any) => state.expectations?.length) && result.timepoints.some((timepoint: any) => timepoint.prospection?.length),
  M16: (result) => states(result).some((state: any) => !animate.has(state.entity) && state.resolved),
  M17: (result) => events(result).some((event: any) => event.modality),
  M18: (result) =>
    result.cost.by_model.some((row: any) => row.priced_as !== 'gemini-2.5-flash') &&
    states(result).every((state: any) => state.model === 'gemini-2.5-flash-lite'),
  M19: (result) => result.timepoints.some((timepoint: any) => timepoint.asymmetry?.length),
};

describe('simulation mechanisms M1–M19', function () {
  this.timeout(120_000);
  let sim: SimulationHarness;
  let without: any;
  before(async () => {
    sim = await startSimulation();
    without = await run([]);
  });
  after(async () => sim?.stop());

  async function run(mechanisms: string[]) {
    const reply = await sim.run({ ...RUN, mechanisms }, 'mechanisms');
    assert.equal(reply.body.status, 'completed', JSON.stringify(reply.body));
    return sim.result(reply.body.id, 'mechanisms');
  }

  it('every mechanism has an observed effect', () => assert.deepEqual(Object.keys(EFFECTS), MECHANISM_IDS));

  for (const id of MECHANISM_IDS) {
    it(`${id}: its effect shows when it is on and not when it is off`, async () => {
      const withIt = await run([id]);
      assert.ok(EFFECTS[id]!(withIt), `${id} on: its effect is missing`);
      assert.ok(!EFFECTS[id]!(without), `${id} off: its effect shows anyway`);
    });
  }

  it("without M4 the models' out-of-range changes stand, so M4 is what holds them", () => {
    assert.ok(!states(without).every(inRange), 'some state left [0, 1] without M4');
  });

  it('M5 and M6 make a run cheaper; M1 lowers what minor entities cost', async () => {
    const lazy = await run(['M5']);
    assert.ok(lazy.cost.calls < without.cost.calls, 'M5: fewer calls');
    const compressed = await run(['M6']);
    assert.ok(compressed.cost.tokens.input < without.cost.tokens.input, 'M6: fewer input tokens');
    const heterogeneous = await run(['M1']);
    assert.ok(heterogeneous.cost.tokens.output < without.cost.tokens.output, 'M1: fewer output tokens');
  });

  it('M18 chooses per action: the light model for entity states, the strong one for scenes', async () => {
    const chosen = await run(['M11', 'M18']);
    assert.deepEqual(chosen.cost.by_model.map((row: any) => row.priced_as).sort(), ['gemini-2.5-flash-lite', 'gemini-2.5-pro']);
    const plain = await run(['M11']);
    assert.deepEqual(
      plain.cost.by_model.map((row: any) => row.priced_as),
      ['gemini-2.5-flash'],
    );
  });

  it('the same request and seed reproduce a run', async () => {
    const again = await run([]);
    assert.deepEqual(again.timepoints, without.timepoints);
  });
});
