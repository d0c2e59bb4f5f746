import assert from 'node:assert/strict';
import { request } from '../../../test/support/http.ts';
import { asUser, type BillingHarness, buy, GATEWAY_KEY, useBilling } from './harness.ts';

const spend = (h: BillingHarness, userId: string, amount: number) =>
  request(h.gatewayUrl, '/api/v1/credits/charge', {
    method: 'POST',
    headers: { 'X-Service-Key': GATEWAY_KEY },
    body: { user_id: userId, amount, operation: 'test.spend', idempotency_key: `spend-${Math.random()}` },
  });

describe('billing: Stripe', function () {
  this.timeout(60_000);
  let h: BillingHarness;
  useBilling((started) => {
    h = started;
  });

  it('sells a pack: checkout through the stripe package, the paid session grants its credits once', async () => {
    const userId = await h.user();
    const { session, events } = await buy(h, userId, 'pack', 'starter');
    assert.match(session.url, /^http:\/\/127\.0\.0\.1:\d+\/checkout\/cs_test_/);
    assert.deepEqual(
      h.stripe.deliveries.filter((d) => d.event === events[0]!.id).map((d) => d.status),
      [200],
    );
    assert.equal(await h.balance(userId), 100);
    // Stripe delivers again (a lost answer): nothing more.
    const again = await h.stripeEvent(events[0]!);
    assert.equal(again.status, 200);
    assert.equal(again.body.outcome, 'duplicate');
    assert.equal(await h.balance(userId), 100);
    const ledger = await h.ledger(userId);
    assert.deepEqual(
      ledger.map((entry) => [entry.amount, entry.operation]),
      [[100, 'billing.pack']],
    );
    const history = await h.call('GET', '/api/v1/billing/history', { headers: asUser(userId) });
    assert.equal(history.body.items[0].kind, 'purchase');
    assert.equal(history.body.items[0].credits, 100);
    assert.equal(history.body.items[0].amount, 499);
  });

  it('sells a plan: the tier at once, the allowance with each paid period, past due keeps it, cancelled ends it', async () => {
    const userId = await h.user();
    const { subscriptionId } = await buy(h, userId, 'plan', 'pro');
    assert.equal(await h.tier(userId), 'pro');
    assert.equal(await h.balance(userId), 1000);

    await h.stripe.act('renew', subscriptionId!);
    assert.equal(await h.balance(userId), 2000);

    await h.stripe.act('fail_payment', subscriptionId!);
    const state = await h.call('GET', '/api/v1/billing/subscription', { headers: asUser(userId) });
    assert.equal(state.body.subscriptions[0].status, 'past_due');
    assert.ok(Date.parse(state.body.subscriptions[0].access_until) > Date.now() + 13 * 86_400_000, 'the retry window runs 14 days');
    assert.equal(await h.tier(userId), 'pro', 'access is kept through the retry window');
    assert.equal(await h.balance(userId), 2000);

    await h.stripe.act('cancel', subscriptionId!);
    assert.equal(await h.tier(userId), 'free');
    const again = await h.call('POST', '/api/v1/billing/checkout', { headers: asUser(userId), body: { kind: 'plan', id: 'enterprise' } });
    assert.equal(again.status, 201, 'a new plan can be bought once the last one ended');
  });

  it('refuses a second plan while one runs (409) and an item not in the catalogue (422)', async () => {
    const userId = await h.user();
    await buy(h, userId, 'plan', 'pro');
    const second = await h.call('POST', '/api/v1/billing/checkout', { headers: asUser(userId), body: { kind: 'plan', id: 'enterprise' } });
    assert.equal(second.status, 409);
    const unknown = await h.call('POST', '/api/v1/billing/checkout', { headers: asUser(userId), body: { kind: 'pack', id: 'nope' } });
    assert.equal(unknown.status, 422);
    assert.equal(unknown.body.errors[0].path, 'body.id');
  });

  it('takes back the credits of a refund after they were spent: what is left, the rest as debt paid from the next grant', async () => {
    const userId = await h.user();
    const { session } = await buy(h, userId, 'pack', 'starter');
    const paymentIntent = h.stripe.events.find((event) => event.data.object.id === session.id)!.data.object.payment_intent as string;
    assert.equal((await spend(h, userId, 80)).status, 201);
    assert.equal(await h.balance(userId), 20);

    await h.stripe.act('refund', paymentIntent);
    await h.settled();
    assert.equal(await h.balance(userId), 0, 'the balance never goes below zero');
    const state = await h.call('GET', '/api/v1/billing/subscription', { headers: asUser(userId) });
    assert.equal(state.body.debt, 80);
    const ledger = await h.ledger(userId);
    assert.deepEqual(
      ledger.map((entry) => entry.amount),
      [100, -80, -20],
    );

    await buy(h, userId, 'pack', 'starter');
    await h.settled();
    assert.equal(await h.balance(userId), 20, 'the next pack paid the debt first');
    assert.equal((await h.call('GET', '/api/v1/billing/subscription', { headers: asUser(userId) })).body.debt, 0);
    const history = await h.call('GET', '/api/v1/billing/history', { headers: asUser(userId) });
    assert.ok(history.body.items.some((item: { kind: string }) => item.kind === 'debt'));
  });

  it('takes back the refunded share of a partial refund, rounded up, and only the new share when refunded further', async () => {
    const userId = await h.user();
    const { session } = await buy(h, userId, 'pack', 'explorer');
    const paymentIntent = h.stripe.events.find((event) => event.data.object.id === session.id)!.data.object.payment_intent as string;
    await h.stripe.act('refund', paymentIntent, { amount: 500 });
    await h.settled();
    // 500 of 1999 cents is 25.01% of 500 credits: 126 (rounded up).
    assert.equal(await h.balance(userId), 500 - 126);
    await h.stripe.act('refund', paymentIntent);
    await h.settled();
    assert.equal(await h.balance(userId), 0);
  });

  it("takes a disputed payment's credits back, and gives them back when the dispute is won", async () => {
    const userId = await h.user();
    const { session } = await buy(h, userId, 'pack', 'starter');
    const paymentIntent = h.stripe.events.find((event) => event.data.object.id === session.id)!.data.object.payment_intent as string;
    const [created] = await h.stripe.act('dispute', paymentIntent);
    await h.settled();
    assert.equal(await h.balance(userId), 0);
    await h.stripe.act('close_dispute', created!.data.object.id, { status: 'won' });
    await h.settled();
    assert.equal(await h.balance(userId), 100);
    // A refund after the won dispute takes them once.
    await h.stripe.act('refund', paymentIntent);
    await h.settled();
    assert.equal(await h.balance(userId), 0);
    assert.deepEqual(
      (await h.ledger(userId)).map((entry) => entry.amount),
      [100, -100, 100, -100],
    );
  });

  it('finds the period a refunded renewal paid through Stripe (a refund names only the PaymentIntent)', async () => {
    const userId = await h.user();
    const { subscriptionId } = await buy(h, userId, 'plan', 'pro');
    const [, paid] = await h.stripe.act('renew', subscriptionId!);
    assert.equal(await h.balance(userId), 2000);
    const invoicePayments: any = await (
      await fetch(`${h.stripe.url}/v1/invoice_payments?invoice=${paid!.data.object.id}`, { headers: { authorization: 'Bearer sk_test_billing_0123456789' } })
    ).json();
    await h.stripe.act('refund', invoicePayments.data[0].payment.payment_intent);
    await h.settled();
    assert.equal(await h.balance(userId), 1000, "the refunded period's allowance was taken back");
  });
});
