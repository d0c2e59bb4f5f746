import assert from 'node:assert/strict';
import { AuthCache } from '../src/auth-cache.ts';

describe('gateway: the credential cache', () => {
  it('remembers a derived value only while the entries it came from are fresh, per kind, and forgets it on clear', async () => {
    const cache = new AuthCache(200);
    await cache.get('sig:a', async () => 'claims');
    let derivations = 0;
    const derive = () => {
      derivations += 1;
      const entry = cache.peek<string>('sig:a');
      return entry && { value: { from: entry.value }, since: entry.at };
    };
    const first = cache.derived('bearer', 'Bearer a', derive);
    assert.deepEqual(first, { from: 'claims' });
    assert.equal(cache.derived('bearer', 'Bearer a', derive), first, 'the same object, not derived again');
    assert.equal(derivations, 1);
    assert.equal(
      cache.derived('api-key', 'Bearer a', () => undefined),
      undefined,
      'another kind does not share it',
    );

    cache.clear();
    assert.equal(cache.derived('bearer', 'Bearer a', derive), undefined, 'gone with the entries it came from');
    await cache.get('sig:a', async () => 'claims');
    assert.ok(cache.derived('bearer', 'Bearer a', derive));
    await new Promise((resolve) => setTimeout(resolve, 250));
    assert.equal(cache.derived('bearer', 'Bearer a', derive), undefined, 'expired with its oldest entry');
    assert.equal(derivations, 4, 'derived again each time it was not fresh');
  });

  it("checks a connection's last credential first, and never hands it another credential's value", async () => {
    const cache = new AuthCache(1_000);
    await cache.get('sig:a', async () => 'a');
    await cache.get('sig:b', async () => 'b');
    const derive = (key: string) => () => {
      const entry = cache.peek<string>(`sig:${key}`);
      return entry && { value: { from: entry.value }, since: entry.at };
    };
    const connection = {};
    const a = cache.derived('bearer', 'Bearer a', derive('a'), connection);
    assert.equal(
      cache.derived('bearer', 'Bearer a', () => assert.fail('not derived again'), connection),
      a,
    );
    assert.deepEqual(cache.derived('bearer', 'Bearer b', derive('b'), connection), { from: 'b' }, 'another credential on the same connection');
    assert.equal(
      cache.derived('api-key', 'Bearer b', () => undefined, connection),
      undefined,
      'the same value under another kind is not it',
    );
    cache.clear();
    assert.equal(cache.derived('bearer', 'Bearer b', derive('b'), connection), undefined, 'forgotten with the entries on clear');
  });
});
