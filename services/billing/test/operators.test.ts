import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { request } from '../../../test/support/http.ts';
import { stripeEvent } from '../../../test/support/stand-ins/stripe.ts';
import { scrape } from '../../kit/test/metrics-support.ts';
import { ADMIN_KEY, type BillingHarness, buy, GATEWAY_KEY, STRIPE_WEBHOOK, service, useBilling } from './harness.ts';

const admin = { 'X-Admin-Key': ADMIN_KEY };

describe('billing: operators', function () {
  this.timeout(60_000);
  let h: BillingHarness;
  useBilling((started) => {
    h = started;
  });

  it("shows a user's state with payments and deliveries", async () => {
    const userId = await h.user();
    await buy(h, userId, 'plan', 'pro');
    const state = await h.call('GET', `/api/v1/billing/users/${userId}`, { headers: admin });
    assert.equal(state.status, 200);
    assert.equal(state.body.tier, 'pro');
    assert.equal(state.body.pushed_tier, 'pro');
    assert.equal(state.body.payments.length, 1);
    assert.equal(state.body.payments[0].credits, 1000);
    assert.equal(state.body.outbox[0].status, 'delivered');
    assert.equal(state.body.outbox[0].idempotency_key, `stripe:purchase:${state.body.payments[0].ref}`);
  });

  it('re-syncs a subscription whose last event never arrived, and sends the tier again', async () => {
    const userId = await h.user();
    const { subscriptionId } = await buy(h, userId, 'plan', 'pro');
    assert.equal(await h.tier(userId), 'pro');

    // An operator changed the tier at the gateway by hand: a re-sync puts billing's back.
    const manual = await request(h.gatewayUrl, `/api/v1/users/${userId}/tier`, {
      method: 'PUT',
      headers: { 'X-Service-Key': GATEWAY_KEY },
      body: { tier: 'enterprise' },
    });
    assert.equal(manual.status, 200);
    let state = await h.call('POST', `/api/v1/billing/users/${userId}/resync`, { headers: service });
    assert.equal(state.status, 200, JSON.stringify(state.body));
    assert.equal(await h.tier(userId), 'pro');

    // The cancellation's webhook is lost: the re-sync reads the subscription from Stripe.
    h.stripe.setWebhookUrl(undefined);
    try {
      await h.stripe.act('cancel', subscriptionId!);
    } finally {
      h.stripe.setWebhookUrl(`${h.url}${STRIPE_WEBHOOK}`);
    }
    assert.equal(await h.tier(userId), 'pro');
    state = await h.call('POST', `/api/v1/billing/users/${userId}/resync`, { headers: admin });
    assert.equal(state.body.subscriptions[0].status, 'canceled');
    assert.equal(state.body.tier, 'free');
    assert.equal(await h.tier(userId), 'free');
  });

  it('parks a grant the gateway refuses for good, counts it, and retries it on a re-sync', async () => {
    const stranger = randomUUID();
    const reply = await h.stripeEvent(
      stripeEvent('checkout.session.completed', {
        id: 'cs_test_stranger',
        object: 'checkout.session',
        mode: 'payment',
        payment_status: 'paid',
        payment_intent: 'pi_test_stranger',
        metadata: { user_id: stranger, pack_id: 'starter' },
        amount_total: 499,
        currency: 'usd',
      }),
    );
    assert.equal(reply.status, 200, 'the payment is recorded whatever the gateway says');
    await h.settled();
    const state = await h.call('GET', `/api/v1/billing/users/${stranger}`, { headers: service });
    assert.equal(state.body.outbox[0].status, 'failed');
    assert.match(state.body.outbox[0].last_error, /404/);
    const metrics = await scrape(h);
    assert.match(metrics, /billing_outbox_entries\{[^}]*status="failed"[^}]*\} 1/);
    assert.match(metrics, /billing_outbox_deliveries_total\{[^}]*kind="grant"[^}]*outcome="failed"[^}]*\} 1/);
    const health = await h.call('GET', '/health');
    assert.deepEqual(health.body.outbox, { pending: 0, failed: 1 });

    const again = await h.call('POST', `/api/v1/billing/users/${stranger}/resync`, { headers: service });
    assert.equal(again.body.outbox[0].status, 'failed');
    assert.equal(again.body.outbox[0].attempts, 2, 'tried once more');
  });

  it('documents every route in its OpenAPI document', async () => {
    const openapi = h.billing.openapi as { paths: Record<string, unknown> };
    for (const path of [
      '/api/v1/billing/packs',
      '/api/v1/billing/plans',
      '/api/v1/billing/checkout',
      '/api/v1/billing/subscription',
      '/api/v1/billing/history',
      '/api/v1/billing/apple/transactions',
      '/api/v1/billing/webhooks/stripe',
      '/api/v1/billing/webhooks/apple',
      '/api/v1/billing/users/{user_id}',
      '/api/v1/billing/users/{user_id}/resync',
    ]) {
      assert.ok(openapi.paths[path], path);
    }
  });
});
