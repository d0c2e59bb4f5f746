import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { signPricedCall } from '@tempora/kit/http';
import { asUser, SERVICE_KEY, type SimulationHarness, startSimulation } from './harness.ts';

const digest = (text: string) => createHash('sha256').update(text).digest('hex');

/** The gateway's priced operation, checked against what the simulation service is asked to run (docs/gateway.md). */
describe('simulation: runs only what the gateway priced', function () {
  this.timeout(60_000);
  let sim: SimulationHarness;
  before(async () => {
    sim = await startSimulation();
  });
  after(() => sim?.stop());

  const body = JSON.stringify({ template: 'athens-war-council', fidelity: 5, mechanisms: [] });
  const priced = (operation: string, overrides: { key?: string; body?: string } = {}) =>
    signPricedCall(overrides.key ?? SERVICE_KEY, { operation, method: 'POST', path: '/api/v1/simulate', bodyDigest: digest(overrides.body ?? body) });
  const start = (header: string) =>
    sim.call('POST', '/api/v1/simulate', { headers: { ...asUser('priced'), 'content-type': 'application/json', 'X-Priced-Operation': header }, raw: body });
  const runs = async () => (await sim.call('GET', '/api/v1/simulations', { headers: asUser('priced') })).body.total as number;

  it('refuses a run priced at another fidelity, for another body, or signed with another key (409), starting nothing', async () => {
    for (const header of [
      priced('simulation.fidelity-1'),
      priced('simulation.fidelity-5', { body: body.replace('5', '1') }),
      priced('simulation.fidelity-5', { key: 'another-key-0123456789' }),
    ]) {
      const reply = await start(header);
      assert.equal(reply.status, 409, header);
    }
    assert.equal(await runs(), 0);
  });

  it('starts the run priced as exactly what it asks for', async () => {
    const reply = await start(priced('simulation.fidelity-5'));
    assert.equal(reply.status, 202, JSON.stringify(reply.body));
    assert.equal(await runs(), 1);
  });
});
