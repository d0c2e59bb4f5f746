import assert from 'node:assert/strict';
import { waitFor } from './wait.ts';

describe('test support: waitFor', () => {
  it('returns the first answer that is not undefined, null or false, zero and the empty string included', async () => {
    let looks = 0;
    assert.equal(await waitFor('the third look', () => (++looks < 3 ? false : 0), { intervalMs: 1 }), 0);
    assert.equal(looks, 3);
    assert.equal(await waitFor('an empty string', async () => ''), '');
  });

  it('looks again after a look that throws', async () => {
    let looks = 0;
    const value = await waitFor(
      'a server that answers on the second look',
      () => {
        looks += 1;
        if (looks === 1) throw new Error('ECONNREFUSED');
        return { ok: true };
      },
      { intervalMs: 1 },
    );
    assert.deepEqual(value, { ok: true });
  });

  it('fails after timeoutMs, naming what it waited for and what the last look threw', async () => {
    const started = Date.now();
    await assert.rejects(
      waitFor(
        'the moon to turn blue',
        () => {
          throw new Error('still grey');
        },
        { timeoutMs: 100, intervalMs: 10 },
      ),
      /timed out after 100 ms waiting for the moon to turn blue \(last look threw: Error: still grey\)/,
    );
    assert.ok(Date.now() - started >= 100);
    await assert.rejects(
      waitFor('nothing', () => undefined, { timeoutMs: 0 }),
      /^Error: timed out after 0 ms waiting for nothing$/,
    );
  });
});
