import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { connectRedis, type RedisClient } from '../src/data/redis.ts';
import { RateLimiter } from '../src/http/rate-limit.ts';
import { createLogger } from '../src/observability/logger.ts';

describe('kit rate limiter', () => {
  // One client for the file: each test counts under its own random prefix.
  let redis: RedisClient | undefined;
  before(async () => {
    redis = await connectRedis(process.env.REDIS_URL, createLogger('t', 'silent'));
  });
  after(async () => {
    await redis?.quit();
  });
  const windows = (key: string) => [
    { name: 'minute', points: 3, durationSeconds: 60, key },
    { name: 'day', points: 5, durationSeconds: 86_400, key },
  ];

  it('counts every window in Redis and reports the tightest', async () => {
    const prefix = `test-${randomBytes(4).toString('hex')}`;
    const limiter = new RateLimiter({ redis, prefix });
    const states = [];
    for (let i = 0; i < 4; i += 1) states.push(await limiter.consume(windows('u1')));
    assert.deepEqual(
      states.map((s) => [s.limit, s.remaining, s.limited]),
      [
        [3, 2, false],
        [3, 1, false],
        [3, 0, false],
        [3, 0, true],
      ],
    );
    assert.ok(states[3]!.resetSeconds >= 59 && states[3]!.resetSeconds <= 60);
    const other = await limiter.consume(windows('u2'));
    assert.equal(other.remaining, 2, 'keys are counted apart');
    const shared = new RateLimiter({ redis, prefix: prefix });
    assert.equal((await shared.consume(windows('u2'))).remaining, 1, 'another replica sees the same counts');
  });

  it('reserves points in batches on busy windows, and replicas together never admit more than the limit', async () => {
    const prefix = `test-${randomBytes(4).toString('hex')}`;
    const window = { name: 'busy', points: 1000, durationSeconds: 60, key: 'k' };
    const one = new RateLimiter({ redis, prefix });
    const remaining = [];
    for (let i = 0; i < 25; i += 1) remaining.push((await one.consume([window])).remaining);
    assert.deepEqual(
      remaining,
      Array.from({ length: 25 }, (_, i) => 999 - i),
      'a single replica reports exact counts',
    );
    const counted = Number(await redis!.get(`${prefix}:busy:k`));
    assert.equal(counted, 40, 'two batches of 20 (a fiftieth of the window) reserved in Redis');
    const two = new RateLimiter({ redis, prefix });
    assert.equal((await two.consume([window])).remaining, 1000 - 40 - 1, "another replica does not see the first one's reserve as available");

    const small = { name: 'race', points: 500, durationSeconds: 60, key: 'k' };
    const replicas = [new RateLimiter({ redis, prefix }), new RateLimiter({ redis, prefix }), new RateLimiter({ redis, prefix })];
    const outcomes = await Promise.all(Array.from({ length: 900 }, (_, i) => replicas[i % 3]!.consume([small])));
    assert.equal(outcomes.filter((outcome) => !outcome.limited).length, 500, 'exactly the limit admitted across replicas');
    assert.ok(outcomes.filter((outcome) => outcome.limited).every((outcome) => outcome.remaining === 0 && outcome.resetSeconds <= 60));

    const exact = new RateLimiter({ redis, prefix, maxLease: 1 });
    await exact.consume([{ ...window, key: 'one-by-one' }]);
    assert.equal(Number(await redis!.get(`${prefix}:busy:one-by-one`)), 1, 'maxLease 1 counts every request in Redis');
  });

  it('admits from a held lease synchronously, and with the same counts and 429 as consume', async () => {
    const limiter = new RateLimiter({ redis, prefix: `test-${randomBytes(4).toString('hex')}` });
    const window = { name: 'admit', points: 100, durationSeconds: 60, key: 'k' };
    const first = limiter.admit([window]);
    assert.ok(first instanceof Promise, 'the first request reserves a batch in Redis');
    assert.equal((await first).headers['X-RateLimit-Remaining'], '99');
    const second = limiter.admit([window]);
    assert.ok(!(second instanceof Promise), 'the next is served from the lease without waiting');
    assert.deepEqual(second.headers, { 'X-RateLimit-Limit': '100', 'X-RateLimit-Remaining': '98', 'X-RateLimit-Reset': second.headers['X-RateLimit-Reset'] });
    assert.equal(second.refusal, undefined);
    for (let i = 0; i < 98; i += 1) assert.equal((await limiter.admit([window])).refusal, undefined);
    const refused = await limiter.admit([window]);
    assert.equal(refused.refusal?.status, 429);
    assert.equal(refused.refusal?.headers['Retry-After'], refused.headers['X-RateLimit-Reset']);
  });

  /**
   * Lets the limiter's reservations come back, however slowly a loaded machine answers: Redis answers in
   * order, so once this PING is answered every reservation asked so far is too. A request that still waits
   * for Redis ran out of its reserve since: its refill was asked for too late.
   */
  async function redisAnswered(): Promise<void> {
    await redis!.ping();
    await new Promise((resolve) => setImmediate(resolve));
  }

  it('asks for the next batch half a batch ahead, so a busy key is admitted without waiting and counted exactly', async () => {
    const prefix = `test-${randomBytes(4).toString('hex')}`;
    const limiter = new RateLimiter({ redis, prefix });
    const window = { name: 'steady', points: 5000, durationSeconds: 60, key: 'k' };
    await limiter.admit([window]);
    let waited = 0;
    let last = '';
    for (let i = 0; i < 1000; i += 1) {
      const admitted = limiter.admit([window]);
      if (admitted instanceof Promise) waited += 1;
      last = (await admitted).headers['X-RateLimit-Remaining']!;
      // Requests arrive between other I/O (every 7th, so that a pause never falls where a batch ends).
      if (i % 7 === 6) await redisAnswered();
    }
    assert.equal(waited, 0, 'no request waited for Redis after the first');
    assert.equal(last, String(5000 - 1001), 'a single replica still reports exact counts');
    const reserved = Number(await redis!.get(`${prefix}:steady:k`));
    assert.ok(reserved > 1001 && reserved <= 1001 + 150, `${reserved} points reserved: at most a batch and a half ahead`);
  });

  it('gives a fast key bigger batches as its pace shows, never more than a fiftieth of the window', async () => {
    const prefix = `test-${randomBytes(4).toString('hex')}`;
    // The key's pace is 97 requests a millisecond by the limiter's clock, however slowly a loaded machine
    // runs this loop: what grows the batches is the pace, not this machine's speed. 97, so that the loop's
    // pauses do not fall where a batch of a hundred ends.
    let now = Date.now();
    const limiter = new RateLimiter({ redis, prefix, now: () => now });
    const window = { name: 'fast', points: 1_000_000, durationSeconds: 60, key: 'k' };
    const admitted = 30_000;
    let waited = 0;
    let last = '';
    for (let i = 0; i < admitted; i += 1) {
      const admission = limiter.admit([window]);
      if (admission instanceof Promise) waited += 1;
      last = (await admission).headers['X-RateLimit-Remaining']!;
      if (i % 97 === 96) {
        now += 1;
        await redisAnswered();
      }
    }
    assert.equal(last, String(1_000_000 - admitted), 'exact counts on a single replica');
    const reserved = Number(await redis!.get(`${prefix}:fast:k`));
    const ahead = reserved - admitted;
    assert.ok(ahead > 150, `${ahead} points reserved ahead: the batches grew past the first (100)`);
    assert.ok(ahead <= 1.5 * 10_000, `${ahead} points reserved ahead: at most a batch and a half of the largest (maxLease 10,000)`);
    assert.equal(waited, 1, 'only the first request waited for Redis: each refill is asked for half a batch ahead');
  });

  it('peeks at the state without counting, in Redis, from a held reserve, and in memory', async () => {
    const big = (key: string) => [{ name: 'big', points: 1000, durationSeconds: 60, key }];
    for (const limiter of [
      new RateLimiter({ redis, prefix: `test-${randomBytes(4).toString('hex')}` }),
      new RateLimiter({ redis: undefined, prefix: 'peek' }),
    ]) {
      assert.deepEqual(
        await limiter.peek(windows('p')),
        { 'X-RateLimit-Limit': '3', 'X-RateLimit-Remaining': '3', 'X-RateLimit-Reset': '60' },
        'an untouched window is whole',
      );
      await limiter.consume(windows('p'));
      assert.equal((await limiter.peek(windows('p')))['X-RateLimit-Remaining'], '2');
      assert.equal((await limiter.peek(windows('p')))['X-RateLimit-Remaining'], '2', 'peeking counts nothing');
      for (let i = 0; i < 3; i += 1) await limiter.consume(windows('p'));
      assert.equal((await limiter.peek(windows('p')))['X-RateLimit-Remaining'], '0');
      await limiter.consume(big('q'));
      assert.equal((await limiter.peek(big('q')))['X-RateLimit-Remaining'], '999', 'a reserve held by this replica counts as unspent');
    }
  });

  it('falls back to memory when Redis is absent or gone', async () => {
    const memory = new RateLimiter({ redis: undefined, prefix: 'm' });
    const results = [];
    for (let i = 0; i < 4; i += 1) results.push((await memory.consume(windows('x'))).limited);
    assert.deepEqual(results, [false, false, false, true]);
    const closed = await connectRedis(process.env.REDIS_URL, createLogger('t', 'silent'));
    await closed!.quit();
    const gone = new RateLimiter({ redis: closed, prefix: 'g' });
    assert.equal((await gone.consume(windows('y'))).remaining, 2);
    assert.equal(gone.fallenBackToMemory, true, 'reported (rate_limiter_memory_fallback) while Redis is gone');
    assert.equal(memory.fallenBackToMemory, false, 'memory by configuration is no fallback');
    assert.equal(new RateLimiter({ redis, prefix: 'r' }).fallenBackToMemory, false);
  });
});
