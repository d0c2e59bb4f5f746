import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { EndlessBody, readPattern } from '../../../test/support/stand-ins/upstream.ts';
import { admin, type GatewayHarness, pausedRequest, type SignedIn, service, startGateway, useGateway } from './harness.ts';

describe('gateway: credits', function () {
  this.timeout(60_000);
  let gw: GatewayHarness;
  useGateway(
    (started) => {
      gw = started;
    },
    { resetUpstreams: true },
  );

  const balanceOf = async (user: SignedIn) => (await gw.call('GET', '/api/v1/credits/balance', { headers: user.headers })).body.balance as number;

  it('1,000 concurrent charges against a balance of 100: exactly 100 succeed and the ledger sums to the balance', async () => {
    const { user } = (await gw.call('POST', '/api/v1/users/resolve', { headers: service, body: { external_id: 'concurrency', provider: 'test' } })).body;
    const repository = gw.instance.repository.ledger;
    // The signup grant is 50: top up to exactly 100.
    await gw.grant(user.id, 100 - user.balance);
    const replies = await Promise.all(
      Array.from({ length: 1000 }, (_, i) =>
        gw.call('POST', '/api/v1/credits/charge', { headers: service, body: { user_id: user.id, amount: 1, operation: 'test.op', idempotency_key: `c-${i}` } }),
      ),
    );
    const statuses: Record<number, number> = {};
    for (const r of replies) statuses[r.status] = (statuses[r.status] ?? 0) + 1;
    assert.deepEqual(statuses, { 201: 100, 402: 900 });
    const refused = replies.find((r) => r.status === 402)!;
    assert.equal(refused.body.required, 1);
    assert.equal(refused.body.available, 0);
    assert.equal(await repository.balance(user.id), 0);
    assert.equal(await repository.ledgerSum(user.id), 0, 'ledger sums to the balance');
    const charges = await gw.instance.knex('credit_ledger').where({ user_id: user.id, kind: 'charge' }).count<{ count: string }[]>('* as count');
    assert.equal(Number(charges[0]!.count), 100);
  });

  it('never charges an idempotency key twice, even concurrently, and refuses its reuse for another amount', async () => {
    const { user } = (await gw.call('POST', '/api/v1/users/resolve', { headers: service, body: { external_id: 'idem', provider: 'test' } })).body;
    const body = { user_id: user.id, amount: 5, operation: 'test.op', idempotency_key: 'same' };
    const replies = await Promise.all(Array.from({ length: 10 }, () => gw.call('POST', '/api/v1/credits/charge', { headers: service, body })));
    assert.equal(replies.filter((r) => r.status === 201).length, 1);
    assert.equal(replies.filter((r) => r.status === 200 && r.body.replayed).length, 9);
    assert.equal(await gw.instance.repository.ledger.balance(user.id), 45);
    const conflict = await gw.call('POST', '/api/v1/credits/charge', { headers: service, body: { ...body, amount: 6 } });
    assert.equal(conflict.status, 409);
    const refund = await gw.call('POST', '/api/v1/credits/refund', { headers: service, body: { user_id: user.id, idempotency_key: 'same' } });
    assert.equal(refund.status, 200);
    assert.equal(refund.body.balance, 50);
    const again = await gw.call('POST', '/api/v1/credits/refund', { headers: service, body: { user_id: user.id, idempotency_key: 'same' } });
    assert.equal(again.body.replayed, true);
    assert.equal(again.body.balance, 50, 'refunded once');
  });

  it('admin grants are idempotent; unknown users are 404; the ledger is append-only', async () => {
    const user = await gw.user();
    const grant = { user_id: user.userId, amount: 30, reason: 'support', idempotency_key: 'g-1' };
    const first = await gw.call('POST', '/api/v1/credits/admin/grant', { headers: admin, body: grant });
    assert.equal(first.status, 201);
    assert.equal(first.body.balance, 80);
    const replay = await gw.call('POST', '/api/v1/credits/admin/grant', { headers: admin, body: grant });
    assert.equal(replay.status, 200);
    assert.equal(replay.body.balance, 80);
    assert.equal((await gw.call('POST', '/api/v1/credits/admin/grant', { headers: admin, body: { ...grant, amount: 31 } })).status, 409);
    assert.equal(
      (await gw.call('POST', '/api/v1/credits/admin/grant', { headers: admin, body: { ...grant, user_id: randomUUID(), idempotency_key: 'g-2' } })).status,
      404,
    );
    assert.equal(
      (await gw.call('POST', '/api/v1/credits/admin/grant', { headers: admin, body: { ...grant, amount: -5, idempotency_key: 'g-3' } })).status,
      422,
    );
    const knex = gw.instance.knex;
    await assert.rejects(knex('credit_ledger').where({ user_id: user.userId }).update({ amount: 1_000_000 }), /append-only/);
    await assert.rejects(knex('credit_ledger').where({ user_id: user.userId }).delete(), /append-only/);
    await assert.rejects(knex('users').where({ id: user.userId }).update({ balance: -1 }), /balance_non_negative/);
  });

  it('history is newest first in the list envelope; balance and costs answer', async () => {
    const user = await gw.user();
    await gw.grant(user.userId, 7);
    const history = await gw.call('GET', '/api/v1/credits/history?limit=1', { headers: user.headers });
    assert.equal(history.status, 200);
    assert.deepEqual(Object.keys(history.body).sort(), ['items', 'limit', 'offset', 'total']);
    assert.equal(history.body.total, 2);
    assert.equal(history.body.items.length, 1);
    assert.equal(history.body.items[0].kind, 'grant');
    assert.equal(history.body.items[0].balance_after, 57);
    const second = await gw.call('GET', '/api/v1/credits/history?limit=1&offset=1', { headers: user.headers });
    assert.equal(second.body.items[0].kind, 'signup_grant');
    assert.equal((await gw.call('GET', '/api/v1/credits/history?limit=1000', { headers: user.headers })).status, 422);
    assert.equal(await balanceOf(user), 57);
    const costs = await gw.call('GET', '/api/v1/credits/costs');
    assert.equal(costs.status, 200);
    const operations = costs.body.operations.map((o: { operation: string }) => o.operation);
    for (const expected of ['generation.hyper', 'generation.balanced', 'generation.hd', 'generation.gemini3', 'simulation.fidelity-1'])
      assert.ok(operations.includes(expected), expected);
  });

  describe('charging proxied calls', () => {
    it('charges by preset before forwarding and reports X-Credits-Charged and X-Balance-After', async () => {
      const user = await gw.user();
      const reply = await gw.call('POST', '/api/v1/timepoints/generate/sync', {
        headers: user.headers,
        body: { query: 'Apollo 11 lands', preset: 'hd', generate_image: true },
      });
      assert.equal(reply.status, 200);
      assert.equal(reply.headers.get('x-credits-charged'), '7');
      assert.equal(reply.headers.get('x-balance-after'), '43');
      assert.equal(await balanceOf(user), 43);
      const history = await gw.call('GET', '/api/v1/credits/history', { headers: user.headers });
      assert.equal(history.body.items[0].operation, 'generation.hd+image');
      const sim = await gw.call('POST', '/api/v1/simulate', { headers: user.headers, body: { prompt: 'x', fidelity: 5 } });
      assert.equal(sim.headers.get('x-credits-charged'), '20');
      assert.equal(gw.upstreams.simulation.requests.length, 1);
    });
    it('refuses with 402 (required and available) and forwards nothing when the balance is short', async () => {
      const user = await gw.user();
      const reply = await gw.call('POST', '/api/v1/simulate', { headers: user.headers, body: { fidelity: 5 } });
      assert.equal(reply.status, 200);
      const short = await gw.call('POST', '/api/v1/simulate', { headers: user.headers, body: { fidelity: 5 } });
      assert.equal(short.status, 200);
      const refused = await gw.call('POST', '/api/v1/simulate', { headers: user.headers, body: { fidelity: 5 } });
      assert.equal(refused.status, 402);
      assert.equal(refused.headers.get('content-type'), 'application/problem+json');
      assert.equal(refused.body.required, 20);
      assert.equal(refused.body.available, 10);
      assert.equal(gw.upstreams.simulation.requests.length, 2);
    });
    it('refunds when the upstream fails (5xx), refuses the input (4xx) or times out', async () => {
      const user = await gw.user();
      gw.upstreams.generation.on('POST /api/v1/timepoints/generate/sync', (_req, res) => {
        res.writeHead(500, { 'content-type': 'application/json' }).end('{"error":"boom"}');
      });
      const failed = await gw.call('POST', '/api/v1/timepoints/generate/sync', { headers: user.headers, body: { query: 'abc' } });
      assert.equal(failed.status, 500);
      assert.equal(failed.headers.get('x-credits-charged'), '0');
      assert.equal(failed.headers.get('x-balance-after'), '50');
      assert.deepEqual(failed.body, { error: 'boom' }, "the upstream's error body, held while the refund was booked");
      // An upstream slower than UPSTREAM_TIMEOUT_MS (1.5 s) is the case under test; the test does not wait for it.
      gw.upstreams.generation.on('POST /api/v1/timepoints/generate/sync', async (_req, res) => {
        await new Promise((resolve) => setTimeout(resolve, 2500));
        res.writeHead(200).end('{}');
      });
      const timedOut = await gw.call('POST', '/api/v1/timepoints/generate/sync', { headers: user.headers, body: { query: 'abc' } });
      assert.equal(timedOut.status, 504);
      assert.equal(timedOut.headers.get('x-balance-after'), '50');
      assert.equal(await balanceOf(user), 50);
      const history = await gw.call('GET', '/api/v1/credits/history', { headers: user.headers });
      assert.deepEqual(
        history.body.items.map((e: { kind: string }) => e.kind),
        ['refund', 'charge', 'refund', 'charge', 'signup_grant'],
      );
      assert.equal(await gw.instance.repository.ledger.ledgerSum(user.userId), 50);
    });
    it('refunds and answers 502 when a refused answer breaks off before its end (the client saw none of it)', async () => {
      const user = await gw.user();
      gw.upstreams.generation.on('POST /api/v1/timepoints/generate/sync', (_req, res) => {
        res.writeHead(500, { 'content-type': 'application/json', 'content-length': '100' });
        res.write('{"error":');
        setTimeout(() => res.socket?.destroy(), 20);
      });
      const broken = await gw.call('POST', '/api/v1/timepoints/generate/sync', { headers: user.headers, body: { query: 'abc' } });
      assert.equal(broken.status, 502);
      assert.equal(broken.headers.get('content-type'), 'application/problem+json');
      assert.equal(broken.headers.get('x-credits-charged'), '0');
      assert.equal(broken.headers.get('x-balance-after'), '50');
      assert.equal(await balanceOf(user), 50);
    });
    it('passes on a refusal too long to hold as a stream once refunded, holding the upstream back meanwhile', async () => {
      const user = await gw.user();
      const body = new EndlessBody();
      gw.upstreams.generation.on('POST /api/v1/timepoints/generate/sync', (_req, res) => {
        res.writeHead(422, { 'content-type': 'application/octet-stream' });
        return body.writeTo(res);
      });
      const res = await pausedRequest(
        `${gw.url}/api/v1/timepoints/generate/sync`,
        { ...user.headers, 'content-type': 'application/json' },
        'POST',
        JSON.stringify({ query: 'abc' }),
      );
      assert.equal(res.statusCode, 422);
      assert.equal(res.headers['x-credits-charged'], '0');
      assert.equal(res.headers['x-balance-after'], '50', 'the head waited for the refund');
      assert.ok((await body.heldBack) !== undefined, 'the upstream is held back, not read into memory whole');
      body.finish();
      assert.equal(await readPattern(res), body.sent, 'every byte, in order');
      assert.equal(await balanceOf(user), 50);
    });
    it('refunds when the upstream cannot be reached (502)', async () => {
      const harness = await startGateway({ GENERATION_URL: 'http://127.0.0.1:9' });
      try {
        const user = await harness.user();
        const reply = await harness.call('POST', '/api/v1/timepoints/generate/sync', { headers: user.headers, body: { query: 'abc' } });
        assert.equal(reply.status, 502);
        assert.equal(reply.headers.get('x-credits-charged'), '0');
        assert.equal(await harness.instance.repository.ledger.balance(user.userId), 50);
      } finally {
        await harness.stop();
      }
    });
  });
});
