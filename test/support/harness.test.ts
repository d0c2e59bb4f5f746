import assert from 'node:assert/strict';
import { startRelay } from './harness.ts';
import { listenStandIn } from './http.ts';

describe('test support: the relay', () => {
  it('keeps one address while what answers behind it stops and starts again', async () => {
    const relay = await startRelay();
    const first = await listenStandIn((_req, res) => res.end('first'));
    try {
      relay.to(first.url);
      // Not kept alive: a pooled connection the stop cuts is the client's to notice, as with any peer restarting.
      assert.equal(await (await fetch(`${relay.url}/`, { headers: { connection: 'close' } })).text(), 'first');

      relay.to(undefined);
      await first.stop();
      await assert.rejects(fetch(`${relay.url}/`), 'a connection to nothing behind the relay fails, as to a peer that is down');

      const second = await listenStandIn((_req, res) => res.end('second'));
      try {
        relay.to(second.url);
        assert.equal(await (await fetch(`${relay.url}/`)).text(), 'second');
      } finally {
        await second.stop();
      }
    } finally {
      await relay.stop();
    }
  });
});
