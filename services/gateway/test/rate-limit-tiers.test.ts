// RATE_LIMIT_TIERS: the tiers' limits as the operator's Gateway sets them (spec.rateLimits.tiers).
import assert from 'node:assert/strict';
import { ConfigError, loadConfig } from '@tempora/kit/runtime';
import { GatewayConfigSchema } from '../src/config.ts';
import { type GatewayHarness, useGateway } from './harness.ts';

describe('gateway: configured tier limits (RATE_LIMIT_TIERS)', function () {
  this.timeout(60_000);
  let gw: GatewayHarness;
  useGateway(
    (started) => {
      gw = started;
    },
    {
      env: {
        RATE_LIMIT_MULTIPLIER: '1',
        RATE_LIMIT_TIERS: JSON.stringify([
          { name: 'pro', requestsPerMinute: 7 },
          { name: 'enterprise', requestsPerMinute: 500, dailyLimit: 20 },
        ]),
      },
    },
  );
  const limitOf = async (headers: Record<string, string>) => Number((await gw.call('GET', '/api/v1/auth/me', { headers })).headers.get('x-ratelimit-limit'));

  it('limits each tier as configured; a tier or daily limit left out keeps its default', async () => {
    assert.equal(await limitOf((await gw.user({ tier: 'pro' })).headers), 7);
    assert.equal(await limitOf((await gw.user({ tier: 'enterprise' })).headers), 20, 'its day window is now the tightest');
    assert.equal(await limitOf((await gw.user({ tier: 'free' })).headers), 10);
  });

  it('refuses a value it cannot use, naming the variable', () => {
    for (const value of ['[{"name":"gold","requestsPerMinute":5}]', '[{"name":"pro","requestsPerMinute":0}]', 'pro=5']) {
      assert.throws(
        () => loadConfig(GatewayConfigSchema, { RATE_LIMIT_TIERS: value }),
        (err: Error) => err instanceof ConfigError && /RATE_LIMIT_TIERS/.test(err.message),
      );
    }
  });
});
