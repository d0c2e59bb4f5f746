import assert from 'node:assert/strict';
import Stripe from 'stripe';
import { request } from '../../../test/support/http.ts';
import { signJws, transaction } from '../../../test/support/stand-ins/apple.ts';
import { asUser, type BillingHarness, buy, STRIPE_KEY, STRIPE_WEBHOOK, service, useBilling } from './harness.ts';

const CANCEL = '/api/v1/billing/subscription/cancel';
const RESUME = '/api/v1/billing/subscription/resume';
const PORTAL = '/api/v1/billing/portal';

describe('billing: plan management', function () {
  this.timeout(60_000);
  let h: BillingHarness;
  useBilling((started) => {
    h = started;
  });

  const state = async (userId: string) => (await h.call('GET', '/api/v1/billing/subscription', { headers: asUser(userId) })).body;
  const eventsOf = (subscriptionId: string, type: string) => h.stripe.events.filter((event) => event.type === type && event.data.object.id === subscriptionId);

  it('cancels at period end and resumes: Stripe changes, its events confirm, the tier runs to the end', async () => {
    const userId = await h.user();
    const { subscriptionId } = await buy(h, userId, 'plan', 'pro');

    const cancelled = await h.call('POST', CANCEL, { headers: asUser(userId) });
    assert.equal(cancelled.status, 200, JSON.stringify(cancelled.body));
    assert.equal(cancelled.body.id, subscriptionId);
    assert.equal(cancelled.body.status, 'active');
    assert.equal(cancelled.body.cancel_at_period_end, true);
    assert.ok(Date.parse(cancelled.body.current_period_end) > Date.now() + 29 * 86_400_000);
    assert.equal((await state(userId)).subscriptions[0].cancel_at_period_end, true);
    await h.stripe.idle();
    const updated = eventsOf(subscriptionId!, 'customer.subscription.updated');
    assert.equal(updated.length, 1, 'Stripe sends customer.subscription.updated');
    assert.equal(updated[0]!.data.object.cancel_at_period_end, true);
    assert.deepEqual(updated[0]!.data.previous_attributes, { cancel_at_period_end: false, cancel_at: null });
    assert.deepEqual(
      h.stripe.deliveries.filter((delivery) => delivery.event === updated[0]!.id).map((delivery) => delivery.status),
      [200],
    );
    assert.ok(await h.billing.repository.events.get('stripe', updated[0]!.id), 'the event was recorded');
    assert.equal(await h.tier(userId), 'pro', 'the period paid for runs on');

    // Cancelling again changes nothing, and Stripe sends nothing.
    assert.equal((await h.call('POST', CANCEL, { headers: asUser(userId) })).body.cancel_at_period_end, true);
    await h.stripe.idle();
    assert.equal(eventsOf(subscriptionId!, 'customer.subscription.updated').length, 1);

    const resumed = await h.call('POST', RESUME, { headers: asUser(userId) });
    assert.equal(resumed.status, 200);
    assert.equal(resumed.body.cancel_at_period_end, false);
    await h.stripe.idle();
    assert.equal(eventsOf(subscriptionId!, 'customer.subscription.updated').length, 2);
    assert.equal((await state(userId)).subscriptions[0].cancel_at_period_end, false);

    // Cancelled again, the period's end comes: Stripe ends the plan and the tier with it.
    await h.call('POST', CANCEL, { headers: asUser(userId) });
    await h.stripe.act('cancel', subscriptionId!);
    await h.settled();
    assert.equal((await state(userId)).subscriptions[0].status, 'canceled');
    assert.equal(await h.tier(userId), 'free');
    assert.equal((await h.call('POST', CANCEL, { headers: asUser(userId) })).status, 404, 'nothing left to cancel');
    assert.equal((await h.call('POST', RESUME, { headers: asUser(userId) })).status, 404);
  });

  it("follows a cancellation made in the customer portal, which only Stripe's webhook reports", async () => {
    const userId = await h.user();
    const { subscriptionId } = await buy(h, userId, 'plan', 'enterprise');
    const portal = await h.call('POST', PORTAL, { headers: asUser(userId) });
    assert.equal(portal.status, 201, JSON.stringify(portal.body));
    assert.match(portal.body.url, /^http:\/\/127\.0\.0\.1:\d+\/billing_portal\/bps_test_/);
    const page = await request(portal.body.url, '');
    assert.equal(page.status, 200);
    assert.match(page.body, /cus_test_/);
    assert.match(page.body, /127\.0\.0\.1:9\/cancelled/, "back to the app's billing page");

    // What the portal does, with Stripe's own client (billing is not asked).
    const api = new URL(h.stripe.url);
    const client = new Stripe(STRIPE_KEY, { host: api.hostname, port: api.port, protocol: 'http' });
    await client.subscriptions.update(subscriptionId!, { cancel_at_period_end: true });
    await h.stripe.idle();
    assert.equal((await state(userId)).subscriptions[0].cancel_at_period_end, true);
    assert.equal(await h.tier(userId), 'enterprise');
  });

  it('answers 503 while Stripe cannot be reached, changing nothing', async () => {
    const userId = await h.user();
    await buy(h, userId, 'plan', 'pro');
    h.stripe.setOutage(true);
    try {
      for (const path of [CANCEL, PORTAL]) {
        const reply = await h.call('POST', path, { headers: asUser(userId) });
        assert.equal(reply.status, 503, path);
        assert.match(reply.headers.get('content-type') ?? '', /problem\+json/);
      }
    } finally {
      h.stripe.setOutage(false);
    }
    assert.equal((await state(userId)).subscriptions[0].cancel_at_period_end, false);
  });

  it("points an App Store subscriber to Apple's subscription management", async () => {
    const userId = await h.user();
    const original = String(5_000_000_000 + Math.floor(Math.random() * 1e8));
    const posted = await h.postTransaction(
      userId,
      await signJws(
        h.apple,
        transaction({
          transactionId: `${original}1`,
          originalTransactionId: original,
          productId: 'dev.tempora.plan.pro',
          type: 'Auto-Renewable Subscription',
          appAccountToken: userId,
          expiresDate: Date.now() + 30 * 86_400_000,
        }),
      ),
    );
    assert.equal(posted.status, 200);
    for (const path of [CANCEL, RESUME, PORTAL]) {
      const reply = await h.call('POST', path, { headers: asUser(userId) });
      assert.equal(reply.status, 409, path);
      assert.equal(reply.body.manage_url, 'https://apps.apple.com/account/subscriptions');
      assert.match(reply.body.detail, /App Store/);
    }
  });

  it("answers a user without a plan, and refuses requests that are not a user's", async () => {
    const userId = await h.user();
    for (const path of [CANCEL, RESUME, PORTAL]) {
      assert.equal((await h.call('POST', path, { headers: asUser(userId) })).status, 404, path);
      assert.equal((await h.call('POST', path, { headers: service })).status, 401, `${path} without X-User-ID`);
      assert.equal((await h.call('POST', path, { headers: { 'X-User-ID': userId } })).status, 401, `${path} without the service key`);
      assert.equal((await h.call('POST', path, { headers: asUser('not-a-uuid') })).status, 400, `${path} with a malformed X-User-ID`);
    }
    const spec = (await h.call('GET', '/openapi.json')).body;
    for (const [path, operationId] of [
      [CANCEL, 'cancelSubscription'],
      [RESUME, 'resumeSubscription'],
      [PORTAL, 'createPortalSession'],
    ] as const)
      assert.equal(spec.paths[path].post.operationId, operationId);
    assert.equal(spec.paths['/api/v1/users/{user_id}/data'].delete.operationId, 'deleteUserData');
  });

  it("works through the gateway: the user with a Bearer token, Stripe's events at the gateway's address", async () => {
    const userId = await h.user();
    // Stripe pointed at the public host: the gateway forwards the webhook byte for byte, without identity.
    h.stripe.setWebhookUrl(`${h.gatewayUrl}${STRIPE_WEBHOOK}`);
    try {
      const checkout = await request(h.gatewayUrl, '/api/v1/billing/checkout', {
        method: 'POST',
        headers: await bearer(userId),
        body: { kind: 'plan', id: 'pro' },
      });
      assert.equal(checkout.status, 201, JSON.stringify(checkout.body));
      const events = await h.stripe.pay(checkout.body.id);
      assert.ok(events.every((event) => h.stripe.deliveries.some((delivery) => delivery.event === event.id && delivery.status === 200)));
      assert.equal(await h.tier(userId), 'pro');

      const cancelled = await request(h.gatewayUrl, CANCEL, { method: 'POST', headers: await bearer(userId) });
      assert.equal(cancelled.status, 200, JSON.stringify(cancelled.body));
      assert.equal(cancelled.body.cancel_at_period_end, true);
      await h.stripe.idle();
      const updated = h.stripe.events.at(-1)!;
      assert.equal(updated.type, 'customer.subscription.updated');
      assert.deepEqual(
        h.stripe.deliveries.filter((delivery) => delivery.event === updated.id).map((delivery) => delivery.status),
        [200],
      );
      const portal = await request(h.gatewayUrl, PORTAL, { method: 'POST', headers: await bearer(userId) });
      assert.equal(portal.status, 201);
    } finally {
      h.stripe.setWebhookUrl(`${h.url}${STRIPE_WEBHOOK}`);
    }
  });

  const bearer = async (userId: string) => {
    const user = (await h.gateway!.instance.repository.users.findUser(userId))!;
    const { token } = await h.gateway!.instance.deps.auth.tokens.accessToken(user);
    return { Authorization: `Bearer ${token}` };
  };
});
