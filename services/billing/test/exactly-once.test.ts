import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { notificationBody, signJws, transaction } from '../../../test/support/stand-ins/apple.ts';
import { paidPackSession, stripeEvent } from '../../../test/support/stand-ins/stripe.ts';
import { waitFor } from '../../../test/support/wait.ts';
import { asUser, type BillingHarness, useBilling } from './harness.ts';

const subscriptionObject = (id: string, userId: string, fields: Record<string, unknown> = {}) => ({
  id,
  object: 'subscription',
  status: 'active',
  customer: 'cus_test_1',
  metadata: { user_id: userId, plan_id: 'pro' },
  cancel_at_period_end: false,
  items: { object: 'list', data: [{ id: 'si_test_1', price: { id: 'price_pro_monthly' }, current_period_end: Math.floor(Date.now() / 1000) + 86_400 * 30 }] },
  ...fields,
});

describe('billing: exactly once', function () {
  this.timeout(90_000);
  let h: BillingHarness;
  useBilling(
    (started) => {
      h = started;
    },
    {
      // Plans sold under known Stripe prices: a subscription's price says its plan.
      BILLING_CATALOGUE: JSON.stringify({
        packs: [{ id: 'starter', name: 'Starter', credits: 100, price: { amount: 499, currency: 'usd' }, apple_product_id: 'dev.tempora.credits.starter' }],
        plans: [
          {
            id: 'pro',
            name: 'Pro',
            tier: 'pro',
            monthly_credits: 1000,
            price: { amount: 999, currency: 'usd' },
            stripe_price: 'price_pro_monthly',
            apple_product_id: 'dev.tempora.plan.pro',
          },
          {
            id: 'enterprise',
            name: 'Enterprise',
            tier: 'enterprise',
            monthly_credits: 10_000,
            price: { amount: 9900, currency: 'usd' },
            stripe_price: 'price_enterprise_monthly',
          },
        ],
      }),
    },
  );

  it('50 concurrent deliveries of one event grant once', async () => {
    const userId = await h.user();
    const event = stripeEvent('checkout.session.completed', paidPackSession(userId));
    const replies = await Promise.all(Array.from({ length: 50 }, () => h.stripeEvent(event)));
    assert.deepEqual(new Set(replies.map((reply) => reply.status)), new Set([200]));
    const outcomes = replies.map((reply) => reply.body.outcome);
    assert.equal(outcomes.filter((outcome) => outcome === 'applied').length, 1);
    assert.equal(outcomes.filter((outcome) => outcome === 'duplicate').length, 49);
    await h.settled();
    assert.equal(await h.balance(userId), 100);
    assert.equal((await h.ledger(userId)).length, 1);
  });

  it('two different events about one payment grant once', async () => {
    const userId = await h.user();
    const session = paidPackSession(userId);
    const completed = await h.stripeEvent(stripeEvent('checkout.session.completed', session));
    const succeeded = await h.stripeEvent(stripeEvent('checkout.session.async_payment_succeeded', session));
    assert.equal(completed.body.outcome, 'applied');
    assert.equal(succeeded.body.outcome, 'unchanged');
    await h.settled();
    assert.equal(await h.balance(userId), 100);
  });

  it('an App Store transaction posted by the app and notified by the App Store grants once', async () => {
    const userId = await h.user();
    const signed = await signJws(
      h.apple,
      transaction({
        productId: 'dev.tempora.plan.pro',
        type: 'Auto-Renewable Subscription',
        appAccountToken: userId,
        expiresDate: Date.now() + 30 * 86_400_000,
      }),
    );
    const [posted, notified] = await Promise.all([
      h.postTransaction(userId, signed),
      h.appleNotification(await notificationBody(h.apple, { type: 'SUBSCRIBED', subtype: 'INITIAL_BUY', signedTransaction: signed })),
    ]);
    assert.equal(posted.status, 200, JSON.stringify(posted.body));
    assert.equal(notified.status, 200, JSON.stringify(notified.body));
    assert.deepEqual([posted.body.outcome, notified.body.outcome].sort(), ['applied', 'unchanged']);
    await h.settled();
    assert.equal(await h.balance(userId), 1000);
    assert.equal(await h.tier(userId), 'pro');
  });

  it('the gateway down during a webhook: the provider gets 200 once recorded, the grant arrives once when it is back', async () => {
    const userId = await h.user();
    const event = stripeEvent('checkout.session.completed', paidPackSession(userId));
    await h.stopGateway();
    try {
      const reply = await h.stripeEvent(event);
      assert.equal(reply.status, 200);
      assert.equal(reply.body.outcome, 'applied');
      // Stripe delivers again while the gateway is still down: nothing new is queued.
      assert.equal((await h.stripeEvent(event)).body.outcome, 'duplicate');
      const state = await h.call('GET', '/api/v1/billing/subscription', { headers: asUser(userId) });
      assert.equal(state.body.pending_credits, 100, 'the grant waits in the outbox');
      await waitFor('the outbox to try the stopped gateway', async () => {
        const operator = await h.call('GET', `/api/v1/billing/users/${userId}`, { headers: { 'X-Service-Key': 'billing-service-key-0123456789' } });
        return operator.body.outbox[0]?.attempts >= 1;
      });
    } finally {
      await h.startGateway();
    }
    await h.settled();
    assert.equal(await h.balance(userId), 100);
    assert.equal((await h.ledger(userId)).length, 1);
    const state = await h.call('GET', '/api/v1/billing/subscription', { headers: asUser(userId) });
    assert.equal(state.body.pending_credits, 0);
    const operator = await h.call('GET', `/api/v1/billing/users/${userId}`, { headers: { 'X-Service-Key': 'billing-service-key-0123456789' } });
    assert.ok(operator.body.outbox[0].attempts >= 2, 'it was retried');
  });

  it('subscription events out of order end in the state of the newest', async () => {
    const userId = await h.user();
    const subscriptionId = `sub_test_${randomUUID().replace(/-/g, '')}`;
    const t = Math.floor(Date.now() / 1000);
    const created = stripeEvent('customer.subscription.created', subscriptionObject(subscriptionId, userId), t);
    const upgraded = stripeEvent(
      'customer.subscription.updated',
      subscriptionObject(subscriptionId, userId, { items: { object: 'list', data: [{ id: 'si_test_1', price: { id: 'price_enterprise_monthly' } }] } }),
      t + 10,
    );
    const pastDue = stripeEvent(
      'customer.subscription.updated',
      subscriptionObject(subscriptionId, userId, {
        status: 'past_due',
        items: { object: 'list', data: [{ id: 'si_test_1', price: { id: 'price_enterprise_monthly' } }] },
      }),
      t + 20,
    );
    const deleted = stripeEvent('customer.subscription.deleted', subscriptionObject(subscriptionId, userId, { status: 'canceled' }), t + 30);

    // Newest first: everything older is stale.
    for (const event of [deleted, upgraded, created, pastDue]) assert.equal((await h.stripeEvent(event)).status, 200);
    await h.settled();
    assert.equal(await h.tier(userId), 'free');

    // Another subscription: an upgrade that arrives before the creation still wins.
    const second = `sub_test_${randomUUID().replace(/-/g, '')}`;
    const otherUser = await h.user();
    await h.stripeEvent(
      stripeEvent(
        'customer.subscription.updated',
        subscriptionObject(second, otherUser, { items: { object: 'list', data: [{ id: 'si_test_2', price: { id: 'price_enterprise_monthly' } }] } }),
        t + 10,
      ),
    );
    const stale = await h.stripeEvent(stripeEvent('customer.subscription.created', subscriptionObject(second, otherUser), t));
    assert.equal(stale.body.outcome, 'unchanged');
    assert.match(stale.body.detail, /stale/);
    await h.settled();
    assert.equal(await h.tier(otherUser), 'enterprise');
  });

  it('a refund that arrives before its payment is settled when the payment does: nothing granted for good', async () => {
    const userId = await h.user();
    const session = paidPackSession(userId);
    const refund = await h.stripeEvent(
      stripeEvent('charge.refunded', { id: 'ch_test_early', object: 'charge', amount: 499, amount_refunded: 499, payment_intent: session.payment_intent }),
    );
    assert.equal(refund.status, 200);
    assert.equal(await h.balance(userId), 0);
    await h.stripeEvent(stripeEvent('checkout.session.completed', session));
    await h.settled();
    assert.equal(await h.balance(userId), 0);
    assert.deepEqual(
      (await h.ledger(userId)).map((entry) => entry.amount),
      [100, -100],
    );
  });

  it('a past-due subscriber whose retry window ran out loses the tier without any message saying so', async () => {
    const userId = await h.user();
    const subscriptionId = `sub_test_${randomUUID().replace(/-/g, '')}`;
    const long = Math.floor(Date.now() / 1000) - 20 * 86_400;
    await h.stripeEvent(stripeEvent('customer.subscription.created', subscriptionObject(subscriptionId, userId), long));
    await h.settled();
    assert.equal(await h.tier(userId), 'pro');
    // The renewal failed 15 days ago; the window is 14 days.
    await h.stripeEvent(stripeEvent('customer.subscription.updated', subscriptionObject(subscriptionId, userId, { status: 'past_due' }), long + 5 * 86_400));
    await h.settled();
    assert.equal(await h.tier(userId), 'free', 'the tier is worked out as of now when the message is recorded');
    // A late payment brings it back.
    await h.stripeEvent(stripeEvent('customer.subscription.updated', subscriptionObject(subscriptionId, userId), long + 19 * 86_400));
    await h.settled();
    assert.equal(await h.tier(userId), 'pro');
    // It fails again now: the tier stays until the window ends, and the outbox's sweep ends it then.
    await h.stripeEvent(stripeEvent('customer.subscription.updated', subscriptionObject(subscriptionId, userId, { status: 'past_due' })));
    await h.settled();
    assert.equal(await h.tier(userId), 'pro');
    assert.deepEqual(await h.billing.book.lapsePastDue(new Date(Date.now() + 13 * 86_400_000)), []);
    assert.deepEqual(await h.billing.book.lapsePastDue(new Date(Date.now() + 15 * 86_400_000)), [userId]);
    await h.settled();
    assert.equal(await h.tier(userId), 'free');
  });
});
