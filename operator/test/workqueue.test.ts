import assert from 'node:assert/strict';
import { WorkQueue } from '../src/kube/workqueue.ts';
import { createMetrics } from '../src/metrics.ts';

describe('work queue', function () {
  const queue = () => new WorkQueue({ name: 'test', metrics: createMetrics(), baseDelayMs: 10 });

  it('holds a key once however often it is added', async function () {
    const q = queue();
    q.add('a');
    q.add('b');
    q.add('a');
    assert.equal(q.length, 2);
    assert.equal(await q.get(), 'a');
    assert.equal(await q.get(), 'b');
  });

  it('never hands out a key that is being processed; re-queues it when done', async function () {
    const q = queue();
    q.add('a');
    const key = await q.get();
    q.add('a');
    assert.equal(q.length, 0, 'not queued while processing');
    let second: string | undefined;
    void q.get().then((k) => (second = k));
    await new Promise((r) => setTimeout(r, 20));
    assert.equal(second, undefined);
    q.done(key!);
    await new Promise((r) => setTimeout(r, 0));
    assert.equal(second, 'a');
  });

  it('backs off retries exponentially per key and forgets on success', async function () {
    const q = queue();
    const delays: number[] = [];
    for (let i = 0; i < 4; i++) {
      const started = Date.now();
      q.addRateLimited('k');
      const key = await q.get();
      delays.push(Date.now() - started);
      q.done(key!);
    }
    assert.equal(q.retries('k'), 4);
    assert.ok(delays[3]! >= 70, `fourth retry waited ${delays[3]} ms (base 10 ms doubling)`);
    q.forget('k');
    assert.equal(q.retries('k'), 0);
  });

  it('keeps the earliest of several requeue-after times', async function () {
    const q = queue();
    q.addAfter('k', 10_000);
    q.addAfter('k', 20);
    const started = Date.now();
    assert.equal(await q.get(), 'k');
    assert.ok(Date.now() - started < 1000);
    q.shutDown();
  });

  it('wakes waiting workers with undefined on shutdown', async function () {
    const q = queue();
    const waiting = q.get();
    q.shutDown();
    assert.equal(await waiting, undefined);
  });
});
