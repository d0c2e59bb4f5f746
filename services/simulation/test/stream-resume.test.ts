import assert from 'node:assert/strict';
import { parseEvents, type SentEvent } from '../../../test/support/sse.ts';
import { FakeModel } from '../../../test/support/stand-ins/chat-model.ts';
import { asUser, type SimulationHarness, startSimulation } from './harness.ts';

type Event = SentEvent<Record<string, unknown>>;

/** Opens a run's stream and reads it to its end, or until `until` events when given (then drops the connection). */
async function readStream(
  sim: SimulationHarness,
  id: string,
  lastEventId?: string,
  until?: number,
): Promise<{ status: number; type: string; events: Event[]; text: string }> {
  const controller = new AbortController();
  const headers: Record<string, string> = { ...asUser('resumer'), ...(lastEventId === undefined ? {} : { 'Last-Event-ID': lastEventId }) };
  const response = await fetch(`${sim.url}/api/v1/simulations/${id}/events`, { headers, signal: controller.signal });
  const type = response.headers.get('content-type') ?? '';
  if (response.status !== 200) return { status: response.status, type, events: [], text: await response.text() };
  const reader = response.body!.getReader();
  const decoder = new TextDecoder();
  let text = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    text += decoder.decode(value, { stream: true });
    if (until !== undefined && parseEvents(text).length >= until) {
      controller.abort();
      break;
    }
  }
  return { status: 200, type, events: parseEvents(text), text };
}

const RUN = { template: 'apollo-13', fidelity: 1, mechanisms: [] };

describe('simulation progress stream resumes after Last-Event-ID', function () {
  this.timeout(120_000);
  let model: FakeModel;
  let sim: SimulationHarness;
  let ended: string;
  let full: Event[];

  before(async () => {
    model = await new FakeModel().start();
    sim = await startSimulation({ OPENROUTER_BASE_URL: model.url });
    const run = await sim.call('POST', '/api/v1/simulate?wait=60', { headers: asUser('resumer'), body: RUN });
    assert.equal(run.status, 200, JSON.stringify(run.body));
    ended = run.body.id;
    full = (await readStream(sim, ended)).events;
  });
  after(async () => {
    await sim?.stop();
    await model?.stop();
  });

  it('numbers a whole stream 1, 2, … : the run, each step (seq n is event n + 2), then the end', () => {
    assert.ok(full.length >= 4, JSON.stringify(full.map((event) => event.event)));
    assert.deepEqual(
      full.map((event) => event.id),
      full.map((_, index) => index + 1),
    );
    assert.equal(full[0]!.event, 'run');
    assert.equal(full.at(-1)!.event, 'end');
    for (const event of full.slice(1, -1)) {
      assert.equal(event.event, 'step');
      assert.equal(event.id, (event.data.seq as number) + 2);
    }
  });

  it('sends only the events after Last-Event-ID, under the ids they had', async () => {
    for (const after of [1, 2, 3, full.length - 1]) {
      const resumed = await readStream(sim, ended, String(after));
      assert.equal(resumed.status, 200);
      assert.deepEqual(
        resumed.events.map(({ id, event, data }) => ({ id, event, seq: data.seq })),
        full.slice(after).map(({ id, event, data }) => ({ id, event, seq: data.seq })),
        `after ${after}`,
      );
    }
  });

  it('treats Last-Event-ID 0 as no event read, and ends at once after the last event', async () => {
    assert.deepEqual(
      (await readStream(sim, ended, '0')).events.map((event) => event.id),
      full.map((event) => event.id),
    );
    const done = await readStream(sim, ended, String(full.length));
    assert.equal(done.status, 200);
    assert.deepEqual(done.events, []);
  });

  it('refuses a Last-Event-ID that is not a decimal id, or beyond what the stream has sent, with 422 problem+json', async () => {
    for (const bad of ['abc', '-1', '1.5', '01', '1e3', '99999999999999999999', String(full.length + 1)]) {
      const refused = await readStream(sim, ended, bad);
      assert.equal(refused.status, 422, `${bad}: ${refused.text}`);
      assert.match(refused.type, /^application\/problem\+json/);
      const problem = JSON.parse(refused.text) as { status: number; errors: Array<{ path: string }> };
      assert.equal(problem.status, 422);
      assert.ok(
        problem.errors.some((error) => error.path.includes('last-event-id')),
        refused.text,
      );
    }
  });

  it('resumes a stream dropped while the run goes on: each event once, in order, to the end', async () => {
    model.latencyMs = 300;
    try {
      const started = await sim.call('POST', '/api/v1/simulate', { headers: asUser('resumer'), body: RUN });
      assert.equal(started.status, 202, JSON.stringify(started.body));
      const id = started.body.id as string;
      const first = await readStream(sim, id, undefined, 2);
      assert.deepEqual(
        first.events.map((event) => event.id),
        [1, 2],
      );
      const rest = await readStream(sim, id, '2');
      const all = [...first.events, ...rest.events];
      assert.deepEqual(
        all.map((event) => event.id),
        all.map((_, index) => index + 1),
      );
      assert.equal(all.at(-1)!.event, 'end');
      assert.equal(all.filter((event) => event.event === 'run').length, 1);
      const steps = all.filter((event) => event.event === 'step').map((event) => event.data.seq);
      assert.deepEqual(
        steps,
        steps.map((_, index) => index),
      );
      assert.equal((all.at(-1)!.data.progress as { steps_done: number }).steps_done, steps.length);
    } finally {
      model.latencyMs = 0;
    }
  });
});
