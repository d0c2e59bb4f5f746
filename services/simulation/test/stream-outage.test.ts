import assert from 'node:assert/strict';
import { startPostgres } from '../../../scripts/infra.ts';
import { parseEvents } from '../../../test/support/sse.ts';
import { FakeModel } from '../../../test/support/stand-ins/chat-model.ts';
import { asUser, type SimulationHarness, startSimulation } from './harness.ts';

/** A progress stream whose database goes away says so with an `error` event instead of stopping silently. */
describe('simulation progress stream during a database outage', function () {
  this.timeout(120_000);
  let postgres: Awaited<ReturnType<typeof startPostgres>> | undefined;
  let model: FakeModel | undefined;
  let sim: SimulationHarness | undefined;

  before(async () => {
    // A server of its own: the test stops it.
    postgres = await startPostgres();
    model = await new FakeModel().start();
    model.latencyMs = 1_000;
    sim = await startSimulation({ OPENROUTER_BASE_URL: model.url }, postgres.url);
  });
  after(async () => {
    await postgres?.up().catch(() => {});
    await sim?.stop().catch(() => {});
    await model?.stop();
    await postgres?.stop();
  });

  it('ends with an error event (a 503 problem) when the database stops mid-run', async () => {
    const started = await sim!.call('POST', '/api/v1/simulate', { headers: asUser('watcher'), body: { template: 'apollo-13', fidelity: 1, mechanisms: [] } });
    assert.equal(started.status, 202, JSON.stringify(started.body));
    const response = await fetch(`${sim!.url}/api/v1/simulations/${started.body.id}/events`, { headers: asUser('watcher') });
    assert.equal(response.status, 200);
    const reader = response.body!.getReader();
    const decoder = new TextDecoder();
    let text = '';
    let stopped = false;
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      text += decoder.decode(value, { stream: true });
      if (!stopped && text.includes('event: run')) {
        stopped = true;
        await postgres!.down();
      }
    }
    const events = parseEvents<{ status?: number }>(text);
    assert.equal(events[0]!.event, 'run');
    const last = events.at(-1)!;
    assert.equal(last.event, 'error', text.slice(-500));
    assert.equal(last.data.status, 503);
  });
});
