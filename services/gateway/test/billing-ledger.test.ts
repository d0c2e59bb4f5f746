import assert from 'node:assert/strict';
import { type GatewayHarness, service, useGateway } from './harness.ts';

describe("gateway: the billing service's ledger routes", function () {
  this.timeout(60_000);
  let gw: GatewayHarness;
  useGateway((started) => {
    gw = started;
  });

  const newUser = async (name: string) =>
    (await gw.call('POST', '/api/v1/users/resolve', { headers: service, body: { external_id: name, provider: 'test' } })).body.user as {
      id: string;
      balance: number;
    };
  const book = (route: 'grant' | 'debit', body: Record<string, unknown>) =>
    gw.call('POST', `/api/v1/credits/${route}`, { headers: service, body: { operation: `billing.${route}`, ...body } });

  it('grants once per key, answering a retry with the original entry and a reused key with 409', async () => {
    const user = await newUser('billing-grant');
    const first = await book('grant', { user_id: user.id, amount: 100, idempotency_key: 'stripe:purchase:pi_1' });
    assert.equal(first.status, 201);
    const retry = await book('grant', { user_id: user.id, amount: 100, idempotency_key: 'stripe:purchase:pi_1' });
    assert.equal(retry.status, 200);
    assert.equal(retry.body.replayed, true);
    assert.equal(retry.body.entry.id, first.body.entry.id);
    assert.equal((await book('grant', { user_id: user.id, amount: 5, idempotency_key: 'stripe:purchase:pi_1' })).status, 409);
    assert.equal((await gw.instance.repository.ledger.balance(user.id))! - user.balance, 100);
  });

  it('debits up to the balance, never below zero, once per key', async () => {
    const user = await newUser('billing-debit');
    const start = user.balance;
    await book('grant', { user_id: user.id, amount: 30, idempotency_key: 'grant-30' });
    const debit = await book('debit', { user_id: user.id, amount: start + 100, idempotency_key: 'stripe:adjust:pi_2:1' });
    assert.equal(debit.status, 201);
    assert.equal(debit.body.taken, start + 30);
    assert.equal(debit.body.balance, 0);
    const retry = await book('debit', { user_id: user.id, amount: start + 100, idempotency_key: 'stripe:adjust:pi_2:1' });
    assert.equal(retry.status, 200);
    assert.equal(retry.body.taken, start + 30, 'a retry answers what the first took, whatever the balance is now');
    const empty = await book('debit', { user_id: user.id, amount: 10, idempotency_key: 'stripe:adjust:pi_2:2' });
    assert.equal(empty.body.taken, 0);
    assert.equal(empty.body.entry.amount, 0, 'a debit of nothing is still recorded');
  });

  it('concurrent debits and charges never take more than the balance holds', async () => {
    const user = await newUser('billing-race');
    await book('grant', { user_id: user.id, amount: 100 - user.balance, idempotency_key: 'top-up' });
    const replies = await Promise.all([
      ...Array.from({ length: 20 }, (_, i) => book('debit', { user_id: user.id, amount: 7, idempotency_key: `d-${i}` })),
      ...Array.from({ length: 20 }, (_, i) =>
        gw.call('POST', '/api/v1/credits/charge', { headers: service, body: { user_id: user.id, amount: 3, operation: 'test.op', idempotency_key: `c-${i}` } }),
      ),
    ]);
    const taken = replies.slice(0, 20).reduce((sum, reply) => sum + (reply.body.taken as number), 0);
    const charged = replies.slice(20).filter((reply) => reply.status === 201).length * 3;
    assert.equal(taken + charged, 100);
    assert.equal(await gw.instance.repository.ledger.balance(user.id), 0);
  });

  it('needs the service key, and an existing user', async () => {
    assert.equal(
      (
        await gw.call('POST', '/api/v1/credits/grant', {
          body: { user_id: '00000000-0000-4000-8000-000000000000', amount: 1, operation: 'x', idempotency_key: 'k' },
        })
      ).status,
      401,
    );
    assert.equal((await book('debit', { user_id: '00000000-0000-4000-8000-000000000000', amount: 1, idempotency_key: 'k' })).status, 404);
  });
});
