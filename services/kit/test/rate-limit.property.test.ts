import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import fc from 'fast-check';
import { propertyParameters, propertyTimeout } from '../../../test/support/properties.ts';
import { connectRedis, type RedisClient } from '../src/data/redis.ts';
import { RateLimiter, type RateWindow } from '../src/http/rate-limit.ts';
import { createLogger } from '../src/observability/logger.ts';

/**
 * Replicas of a service (RateLimiter instances on one Redis, as gateway replicas are) under any mix of
 * concurrent and sequential requests: together they never admit more than a window's limit, and they
 * lose at most what the limiter documents (a batch and a half of reserved points per replica).
 */

const windowShape = fc.record({
  points: fc.oneof(fc.integer({ min: 1, max: 99 }), fc.integer({ min: 100, max: 600 })),
  maxLease: fc.integer({ min: 1, max: 200 }),
});

const scenario = fc.record({
  replicas: fc.integer({ min: 2, max: 3 }),
  windows: fc.array(windowShape, { minLength: 1, maxLength: 2 }),
  // Bursts of requests sent at once, each to a replica; the bursts one after the other.
  bursts: fc.array(fc.array(fc.nat(), { minLength: 1, maxLength: 120 }), { minLength: 1, maxLength: 6 }),
});

describe('kit rate limiter: properties across replicas', function () {
  this.timeout(propertyTimeout(40_000));
  let redis: RedisClient | undefined;
  before(async () => {
    redis = await connectRedis(process.env.REDIS_URL, createLogger('t', 'silent'));
  });
  after(async () => {
    await redis?.quit();
  });

  it('replicas on one Redis admit at most the limit of every window, and lose at most a batch and a half each', async () => {
    await fc.assert(
      fc.asyncProperty(scenario, async ({ replicas, windows: shapes, bursts }) => {
        const prefix = `fc-${randomBytes(5).toString('hex')}`;
        const maxLease = shapes[0]!.maxLease;
        const limiters = Array.from({ length: replicas }, () => new RateLimiter({ redis, prefix, maxLease }));
        // Windows of a minute: the whole scenario happens within one of them.
        const windows: RateWindow[] = shapes.map((shape, i) => ({ name: `w${i}`, points: shape.points, durationSeconds: 60, key: 'k' }));
        let admitted = 0;
        let sent = 0;
        for (const burst of bursts) {
          const answers = await Promise.all(burst.map((pick) => limiters[pick % replicas]!.admit(windows.map((window) => ({ ...window })))));
          sent += burst.length;
          for (const answer of answers) {
            const remaining = Number(answer.headers['X-RateLimit-Remaining']);
            assert.ok(remaining >= 0);
            if (answer.refusal) {
              assert.equal(answer.refusal.status, 429);
              assert.equal(remaining, 0, 'a refusal says nothing is left');
            } else admitted += 1;
          }
          await new Promise((resolve) => setImmediate(resolve));
        }
        const limit = Math.min(...windows.map((window) => window.points));
        assert.ok(admitted <= limit, `${admitted} admitted across ${replicas} replicas; the limit is ${limit}`);
        if (windows.length === 1) {
          const ceiling = Math.max(1, Math.min(maxLease, Math.floor(limit / 50)));
          const lost = ceiling === 1 ? 0 : replicas * Math.floor(1.5 * ceiling);
          assert.ok(admitted >= Math.min(sent, limit) - lost, `${admitted} admitted of ${sent} sent: at most ${lost} lost to reserves (limit ${limit})`);
          if (ceiling === 1) assert.equal(admitted, Math.min(sent, limit), 'windows counted one by one are exact');
        }
      }),
      propertyParameters(25),
    );
  });
});
