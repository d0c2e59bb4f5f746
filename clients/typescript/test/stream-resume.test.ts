/**
 * A simulation's progress stream that drops midway, against the real simulation service: the client opens it
 * again with Last-Event-ID, the service sends only the events after it, and each event is yielded once.
 */
import assert from 'node:assert/strict';
import { asUser, type SimulationHarness, startSimulation } from '../../../services/simulation/test/harness.ts';
import { FakeModel } from '../../../test/support/stand-ins/chat-model.ts';
import { type SimulationEvent, Tempora } from '../src/index.ts';

const ids = (text: string) => [...text.matchAll(/^id: (\d+)$/gm)].map((match) => Number(match[1]));

/** The body of `response` up to the end of its `events`-th event, then an error, as a connection cut there. */
function cutAfter(response: Response, events: number, sent: string[]): Response {
  const decoder = new TextDecoder();
  const encoder = new TextEncoder();
  let text = '';
  const body = response.body!.pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, controller) {
        const before = text.length;
        text += decoder.decode(chunk, { stream: true });
        const blocks = text.split('\n\n');
        if (blocks.length - 1 < events) return controller.enqueue(chunk);
        const end = blocks.slice(0, events).join('\n\n').length + 2;
        controller.enqueue(encoder.encode(text.slice(before, end)));
        sent.push(text.slice(0, end));
        controller.error(new TypeError('the connection was cut'));
      },
    }),
  );
  return new Response(body, { status: response.status, headers: response.headers });
}

describe('@tempora/client resumes a dropped simulation stream (the real simulation service)', function () {
  this.timeout(120_000);
  let model: FakeModel;
  let sim: SimulationHarness;

  before(async () => {
    model = await new FakeModel().start();
    model.latencyMs = 200;
    sim = await startSimulation({ OPENROUTER_BASE_URL: model.url });
  });
  after(async () => {
    await sim?.stop();
    await model?.stop();
  });

  it('reconnects with the last id it read and yields every event once, in order, to `end`', async () => {
    const started = await sim.call('POST', '/api/v1/simulate', { headers: asUser('client'), body: { template: 'apollo-13', fidelity: 1, mechanisms: [] } });
    assert.equal(started.status, 202, JSON.stringify(started.body));
    const asked: Array<string | null> = [];
    const wire: string[] = [];
    const tempora = new Tempora({
      baseUrl: sim.url,
      // The service as the gateway calls it (service key and X-User-ID); the first stream is cut after two events.
      fetch: async (request) => {
        for (const [name, value] of Object.entries(asUser('client'))) request.headers.set(name, value);
        const response = await fetch(request);
        if (!request.url.endsWith('/events')) return response;
        asked.push(request.headers.get('last-event-id'));
        if (asked.length === 1) return cutAfter(response, 2, wire);
        const [mirror, kept] = response.body!.tee();
        void new Response(mirror).text().then((text) => wire.push(text));
        return new Response(kept, { status: response.status, headers: response.headers });
      },
    });
    const events: SimulationEvent[] = [];
    for await (const event of tempora.simulationEvents(started.body.id)) events.push(event);

    assert.deepEqual(asked, [null, '2']);
    assert.deepEqual(
      events.map((event) => Number(event.id)),
      events.map((_, index) => index + 1),
    );
    assert.equal(events[0]!.event, 'run');
    assert.equal(events.at(-1)!.event, 'end');
    const steps = events.filter((event) => event.event === 'step').map((event) => event.data.seq);
    assert.deepEqual(
      steps,
      steps.map((_, index) => index),
    );
    // The second connection carried only what came after event 2: the server resumed, the client skipped nothing.
    await new Promise((resolve) => setTimeout(resolve, 50));
    assert.deepEqual(ids(wire[0]!), [1, 2]);
    assert.deepEqual(
      ids(wire[1]!),
      events.slice(2).map((event) => Number(event.id)),
    );
  });
});
