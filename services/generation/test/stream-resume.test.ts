import assert from 'node:assert/strict';
import { parseEvents } from '../../../test/support/sse.ts';
import { fakeVendorSuite, QUERY, user } from './harness.ts';

/**
 * A generation stream is its render (closing it cancels the agents), so it cannot be resumed: its events are
 * numbered, Last-Event-ID 0 is a fresh start, and a reconnect after an event is refused before anything runs.
 */
describe('generation stream and Last-Event-ID', function () {
  this.timeout(30_000);
  const { fake, gen } = fakeVendorSuite();

  const stream = (lastEventId?: string) =>
    fetch(`${gen.url}/api/v1/timepoints/generate/stream`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...user('streamer'), ...(lastEventId === undefined ? {} : { 'Last-Event-ID': lastEventId }) },
      body: JSON.stringify({ query: QUERY }),
    });

  it('numbers its events 1, 2, … from `start` to `done`, and takes Last-Event-ID 0 as a fresh start', async () => {
    for (const header of [undefined, '0']) {
      const response = await stream(header);
      assert.equal(response.status, 200);
      const events = parseEvents(await response.text());
      assert.deepEqual(
        events.map((event) => event.id),
        events.map((_, index) => index + 1),
      );
      assert.equal(events[0]!.event, 'start');
      assert.equal(events.filter((event) => event.event === 'agent').length, 12);
      assert.equal(events.at(-1)!.event, 'done');
    }
  });

  it('refuses a reconnect after an event with 422 problem+json, before any agent runs', async () => {
    const refused = await stream('3');
    assert.equal(refused.status, 422);
    assert.match(refused.headers.get('content-type') ?? '', /^application\/problem\+json/);
    const problem = (await refused.json()) as { errors: Array<{ path: string; message: string }> };
    assert.equal(problem.errors[0]!.path, 'headers.last-event-id');
    assert.match(problem.errors[0]!.message, /cannot be resumed/);
    assert.equal(fake.requests.length, 0, 'no model was called');
  });

  it('refuses a Last-Event-ID that is not a decimal id with 422 problem+json', async () => {
    for (const bad of ['abc', '-1', '1.5', '01', '1e3', '99999999999999999999']) {
      const refused = await stream(bad);
      assert.equal(refused.status, 422, bad);
      assert.match(refused.headers.get('content-type') ?? '', /^application\/problem\+json/);
      const problem = (await refused.json()) as { errors: Array<{ path: string }> };
      assert.equal(problem.errors[0]!.path, 'headers.last-event-id', bad);
    }
    assert.equal(fake.requests.length, 0, 'no model was called');
  });
});
