import assert from 'node:assert/strict';
import { FakeModel, minimalReply } from '../../../test/support/stand-ins/chat-model.ts';
import { dialogViolations, exposureViolations } from '../src/domain/exposure.ts';
import { scenarioOf } from '../src/domain/plan.ts';
import { TEMPLATE_DIRECTORY, TemplateCatalog } from '../src/domain/templates.ts';
import { createWorld, expose } from '../src/domain/world.ts';
import { asUser, type SimulationHarness, startSimulation } from './harness.ts';

const catalog = TemplateCatalog.load(TEMPLATE_DIRECTORY);

describe('simulation exposure validator', function () {
  this.timeout(60_000);

  describe('the rule', () => {
    const world = createWorld(scenarioOf(catalog.get('cuban-missile-crisis')!));

    it('lets an entity use what it held from the start, and nothing it was not exposed to', () => {
      assert.deepEqual(exposureViolations(world, [{ entity: 'khrushchev', facts: ['k-tactical', 'k-jupiters'], where: 'test' }]), []);
      const refused = exposureViolations(world, [{ entity: 'kennedy', facts: ['k-jupiters', 'k-tactical'], where: 'test' }]);
      assert.deepEqual(refused, [{ entity: 'kennedy', fact: 'k-tactical', where: 'test', reason: 'not exposed' }]);
      assert.equal(exposureViolations(world, [{ entity: 'kennedy', facts: ['k-invented'], where: 'test' }])[0]!.reason, 'unknown fact');
    });

    it('counts an exposure from the moment it happens', () => {
      const copy = structuredClone(world);
      expose(copy, { entity: 'kennedy', fact: 'k-tactical', channel: 'told', source: 'khrushchev', timepoint: 't2', step: 1 });
      assert.deepEqual(exposureViolations(copy, [{ entity: 'kennedy', facts: ['k-tactical'], where: 'test' }]), []);
    });

    it('in a dialog, a listener may use what was revealed to it only in later turns, and only under M3', () => {
      const turns = [
        { speaker: 'khrushchev', to: 'dobrynin', uses_knowledge: [], reveals: 'k-tactical' },
        { speaker: 'dobrynin', to: 'khrushchev', uses_knowledge: ['k-tactical'], reveals: null },
      ];
      assert.deepEqual(dialogViolations(world, turns, ['khrushchev', 'dobrynin'], true), []);
      assert.equal(dialogViolations(world, turns, ['khrushchev', 'dobrynin'], false).length, 1, 'without M3 nothing spreads');
      assert.equal(dialogViolations(world, [...turns].reverse(), ['khrushchev', 'dobrynin'], true).length, 1, 'used before it was revealed');
    });
  });

  describe('in a run, against a model that breaks it', () => {
    let model: FakeModel;
    let sim: SimulationHarness;
    before(async () => {
      model = await new FakeModel().start();
      sim = await startSimulation({ OPENROUTER_BASE_URL: model.url, EXPOSURE_RETRIES: '2' });
    });
    after(async () => {
      await sim?.stop();
      await model?.stop();
    });

    /** Kennedy's first answer cites the Soviet tactical weapons, which only Khrushchev knows of. */
    function leaky(times: number) {
      let leaks = 0;
      model.responder = (request) => {
        const reply = minimalReply(request) as Record<string, unknown>;
        if (request.action === 'entity' && request.prompt.entity.id === 'kennedy' && leaks < times) {
          leaks += 1;
          return { ...reply, uses_knowledge: ['k-tactical'] };
        }
        return reply;
      };
    }

    it('refuses the step, asks again with the refusal named, and records it', async () => {
      leaky(1);
      const reply = await sim.run({ template: 'cuban-missile-crisis', mode: 'FORWARD', fidelity: 1, mechanisms: [] }, 'exposure');
      assert.equal(reply.body.status, 'completed', JSON.stringify(reply.body));
      const result = await sim.result(reply.body.id, 'exposure');
      const refusals = result.validation.exposure_refusals;
      assert.equal(refusals.length, 1);
      assert.deepEqual(refusals[0].violations, [{ entity: 'kennedy', fact: 'k-tactical', where: 'entity answer', reason: 'not exposed' }]);
      const kennedy = model.requests.filter((request) => request.action === 'entity' && request.prompt.entity?.id === 'kennedy');
      assert.match(kennedy[1]!.raw.messages[1].content, /refused: kennedy cannot use k-tactical/);
      assert.ok(
        result.timepoints
          .flatMap((timepoint: any) => timepoint.states)
          .every((state: any) => !state.uses_knowledge.includes('k-tactical') || state.entity === 'khrushchev'),
      );
      assert.ok(!(kennedy[1]!.prompt.known as Array<{ id: string }>).some((fact) => fact.id === 'k-tactical'), 'the fact was never offered to Kennedy');
    });

    it('fails the run (422, the violations named) when the model keeps breaking it, and releases what the run held', async () => {
      leaky(10);
      const reply = await sim.run({ template: 'cuban-missile-crisis', mode: 'FORWARD', fidelity: 1, mechanisms: [] }, 'exposure');
      assert.equal(reply.body.status, 'failed');
      assert.equal(reply.body.error.status, 422);
      assert.match(reply.body.error.detail, /not exposed/);
      assert.equal(reply.body.error.violations[0].fact, 'k-tactical');
      const status = await sim.call('GET', `/api/v1/simulations/${reply.body.id}`, { headers: asUser('exposure') });
      assert.ok(status.body.cost.actual_usd > 0, 'the refused answers were paid for');
    });
  });
});
