import assert from 'node:assert/strict';
import { plan } from '../../scripts/start.ts';

/**
 * What `npm start` would run, without running it: every process listens on loopback unless HOST says
 * otherwise (conventions.md, "Ports"), and is reached where it listens. The tour (tour.test.ts) runs the
 * platform itself; this checks the environment each of its processes is given.
 */
describe('npm start: where the platform listens', () => {
  const shared = { DATABASE_URL: 'postgres://tempora@127.0.0.1:5432/tempora', REDIS_URL: 'redis://127.0.0.1:6379' };

  it('binds every service, worker and stand-in to 127.0.0.1 when HOST is unset', () => {
    const started = plan(shared);
    assert.equal(started.env.HOST, '127.0.0.1');
    assert.ok(started.applied.includes('HOST'));
    assert.deepEqual(
      started.units.map((unit) => unit.name),
      [
        'stripe-stand-in',
        'graph',
        'generation',
        'simulation',
        'conductor',
        'billing',
        'gateway',
        'graph-renderer',
        'graph-expander',
        'graph-judge',
        'generation-worker',
      ],
    );
    for (const unit of started.units) {
      assert.equal({ ...started.env, ...unit.env }.HOST, '127.0.0.1', unit.name);
      assert.match(unit.url, /^http:\/\/127\.0\.0\.1:\d+$/, unit.name);
    }
    for (const peer of ['GATEWAY_URL', 'GENERATION_URL', 'GRAPH_URL', 'SIMULATION_URL', 'CONDUCTOR_URL', 'BILLING_URL', 'STRIPE_API_URL', 'PUBLIC_URL'])
      assert.match(started.env[peer]!, /^http:\/\/127\.0\.0\.1:\d+$/, peer);
  });

  it('keeps a HOST that is set: all interfaces are reached on loopback, one address at that address', () => {
    const everywhere = plan({ HOST: '0.0.0.0' });
    assert.equal(everywhere.env.HOST, '0.0.0.0');
    assert.ok(!everywhere.applied.includes('HOST'));
    assert.equal(everywhere.url('gateway'), 'http://127.0.0.1:8080');

    const one = plan({ HOST: '192.0.2.10' });
    assert.equal(one.env.HOST, '192.0.2.10');
    assert.equal(one.env.GRAPH_URL, 'http://192.0.2.10:8082');
    assert.equal(one.units.find((unit) => unit.name === 'gateway')!.url, 'http://192.0.2.10:8080');
    // The Stripe stand-in is a test double that pays for packs on request: it stays on loopback.
    assert.equal(one.units.find((unit) => unit.name === 'stripe-stand-in')!.url, 'http://127.0.0.1:12111');

    assert.equal(plan({ HOST: '::1' }).url('graph'), 'http://[::1]:8082');
  });

  it("lets the services behind the gateway believe its X-Forwarded-For, and the gateway no client's", () => {
    const started = plan(shared);
    const trusted = (name: string) => ({ ...started.env, ...started.units.find((unit) => unit.name === name)!.env }).TRUSTED_PROXIES;
    assert.equal(trusted('gateway'), undefined);
    for (const backend of ['graph', 'generation', 'simulation', 'conductor', 'billing']) assert.equal(trusted(backend), '127.0.0.0/8,::1', backend);
    assert.equal(
      { ...plan({ HOST: '192.0.2.10' }).env, ...plan({ HOST: '192.0.2.10' }).units.find((unit) => unit.name === 'graph')!.env }.TRUSTED_PROXIES,
      '127.0.0.0/8,::1,192.0.2.10',
    );
  });
});
