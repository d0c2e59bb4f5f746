import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import { RunWatch } from '../src/run-watch.ts';

/** How long `promise` takes to settle, in milliseconds. */
async function timed(promise: Promise<void>): Promise<number> {
  const started = performance.now();
  await promise;
  return performance.now() - started;
}

/** The waits of a progress stream and of `?wait`: on the run's events here, bounded for runs elsewhere. */
describe('simulation run watch', () => {
  const RUN = 'a1b2';

  it('wakes at an event of the run instead of sleeping out its bound', async () => {
    const events = new EventEmitter();
    const watch = new RunWatch(events, RUN, {});
    setTimeout(() => events.emit(`run:${RUN}`, { type: 'step' }), 20);
    assert.ok((await timed(watch.next(5_000))) < 1_000);
    watch.close();
  });

  it('does not miss an event that came before the wait, until reset', async () => {
    const events = new EventEmitter();
    const watch = new RunWatch(events, RUN, {});
    events.emit(`run:${RUN}`, { type: 'step' });
    assert.ok((await timed(watch.next(5_000))) < 100, 'an event since the last reset answers at once');
    watch.reset();
    assert.ok((await timed(watch.next(50))) >= 45, 'after a reset, only a new event (or the bound) ends the wait');
    watch.close();
  });

  it('waits out its bound when nothing happens here (a run on another replica)', async () => {
    const watch = new RunWatch(new EventEmitter(), RUN, {});
    const took = await timed(watch.next(80));
    assert.ok(took >= 75 && took < 1_000, `${took} ms`);
    watch.close();
  });

  it('ignores other runs, and other event types with `only`', async () => {
    const events = new EventEmitter();
    const watch = new RunWatch(events, RUN, { only: 'end' });
    const waiting = timed(watch.next(5_000));
    events.emit('run:another', { type: 'end' });
    events.emit(`run:${RUN}`, { type: 'step' });
    setTimeout(() => events.emit(`run:${RUN}`, { type: 'end' }), 60);
    const took = await waiting;
    assert.ok(took >= 55 && took < 1_000, `${took} ms: woken by this run's end only`);
    watch.close();
  });

  it('wakes when its signal aborts, and stops listening once closed', async () => {
    const events = new EventEmitter();
    const controller = new AbortController();
    const watch = new RunWatch(events, RUN, { signal: controller.signal });
    setTimeout(() => controller.abort(), 20);
    assert.ok((await timed(watch.next(5_000))) < 1_000);
    watch.close();
    assert.equal(events.listenerCount(`run:${RUN}`), 0);
  });
});
