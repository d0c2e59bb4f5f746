import assert from 'node:assert/strict';
import { notificationBody, signJws, type TransactionFields, transaction } from '../../../test/support/stand-ins/apple.ts';
import { asUser, type BillingHarness, useBilling } from './harness.ts';

const DAY = 86_400_000;
const PRO = 'dev.tempora.plan.pro';

describe('billing: App Store', function () {
  this.timeout(60_000);
  let h: BillingHarness;
  useBilling((started) => {
    h = started;
  });

  const signed = (fields: TransactionFields) => signJws(h.apple, transaction(fields));
  const notify = async (type: string, fields: { transaction?: TransactionFields; subtype?: string; renewal?: Record<string, unknown> }) => {
    const reply = await h.appleNotification(
      await notificationBody(h.apple, {
        type,
        ...(fields.subtype ? { subtype: fields.subtype } : {}),
        ...(fields.transaction ? { signedTransaction: await signed(fields.transaction) } : {}),
        ...(fields.renewal ? { signedRenewal: await signJws(h.apple, { environment: 'Sandbox', signedDate: Date.now(), ...fields.renewal }) } : {}),
      }),
    );
    assert.equal(reply.status, 200, JSON.stringify(reply.body));
    await h.settled();
    return reply.body as { outcome: string; detail: string | null };
  };
  const subscription = async (userId: string) => (await h.call('GET', '/api/v1/billing/subscription', { headers: asUser(userId) })).body.subscriptions[0];

  it('grants a consumable the app posts, once however often it is posted', async () => {
    const userId = await h.user();
    const jws = await signed({ productId: 'dev.tempora.credits.explorer', appAccountToken: userId, price: 19990 });
    const first = await h.postTransaction(userId, jws);
    assert.equal(first.status, 200, JSON.stringify(first.body));
    assert.equal(first.body.outcome, 'applied');
    assert.equal((await h.postTransaction(userId, jws)).body.outcome, 'unchanged');
    assert.equal(await h.balance(userId), 500);
    const history = await h.call('GET', '/api/v1/billing/history', { headers: asUser(userId) });
    assert.equal(history.body.items[0].amount, 1999, "Apple's milliunits in cents");
    assert.equal(history.body.items[0].currency, 'usd');
  });

  it('follows a subscription through every notification type', async () => {
    const userId = await h.user();
    const original = String(3_000_000_000 + Math.floor(Math.random() * 1e8));
    const period = (transactionId: string, start: number) => ({
      transactionId,
      originalTransactionId: original,
      productId: PRO,
      type: 'Auto-Renewable Subscription' as const,
      appAccountToken: userId,
      expiresDate: start + 30 * DAY,
    });

    // SUBSCRIBED: the tier and the first period's allowance.
    assert.equal((await notify('SUBSCRIBED', { subtype: 'INITIAL_BUY', transaction: period(`${original}1`, Date.now()) })).outcome, 'applied');
    assert.equal(await h.tier(userId), 'pro');
    assert.equal(await h.balance(userId), 1000);

    // DID_RENEW: the next period's allowance.
    await notify('DID_RENEW', { transaction: period(`${original}2`, Date.now()) });
    assert.equal(await h.balance(userId), 2000);

    // DID_CHANGE_RENEWAL_STATUS: it will not renew; the period runs on.
    await notify('DID_CHANGE_RENEWAL_STATUS', { subtype: 'AUTO_RENEW_DISABLED', transaction: period(`${original}2`, Date.now()) });
    assert.equal((await subscription(userId)).cancel_at_period_end, true);
    assert.equal(await h.tier(userId), 'pro');
    await notify('DID_CHANGE_RENEWAL_STATUS', { subtype: 'AUTO_RENEW_ENABLED', transaction: period(`${original}2`, Date.now()) });
    assert.equal((await subscription(userId)).cancel_at_period_end, false);

    // DID_FAIL_TO_RENEW in Apple's billing grace period: the tier until the grace period ends.
    const graceEnd = Date.now() + 6 * DAY;
    await notify('DID_FAIL_TO_RENEW', {
      subtype: 'GRACE_PERIOD',
      transaction: period(`${original}2`, Date.now() - 30 * DAY),
      renewal: { originalTransactionId: original, productId: PRO, autoRenewStatus: 1, gracePeriodExpiresDate: graceEnd },
    });
    const pastDue = await subscription(userId);
    assert.equal(pastDue.status, 'past_due');
    assert.equal(Date.parse(pastDue.access_until), graceEnd);
    assert.equal(await h.tier(userId), 'pro');

    // GRACE_PERIOD_EXPIRED: no more access.
    await notify('GRACE_PERIOD_EXPIRED', { transaction: period(`${original}2`, Date.now() - 30 * DAY) });
    assert.equal(await h.tier(userId), 'free');

    // DID_RENEW after billing recovery: back, with that period's allowance.
    await notify('DID_RENEW', { subtype: 'BILLING_RECOVERY', transaction: period(`${original}3`, Date.now()) });
    assert.equal(await h.tier(userId), 'pro');
    assert.equal(await h.balance(userId), 3000);

    // EXPIRED: the end.
    await notify('EXPIRED', { subtype: 'VOLUNTARY', transaction: period(`${original}3`, Date.now() - 30 * DAY) });
    assert.equal(await h.tier(userId), 'free');
    assert.equal(await h.balance(userId), 3000, 'the allowances paid for stay');
  });

  it('REFUND takes the credits back; a refunded current period also ends the subscription', async () => {
    const userId = await h.user();
    const pack = { transactionId: String(4_000_000_000 + Math.floor(Math.random() * 1e8)), productId: 'dev.tempora.credits.starter', appAccountToken: userId };
    await h.postTransaction(userId, await signed(pack));
    assert.equal(await h.balance(userId), 100);
    await notify('REFUND', { transaction: { ...pack, revocationDate: Date.now() } });
    assert.equal(await h.balance(userId), 0);

    const original = String(5_000_000_000 + Math.floor(Math.random() * 1e8));
    const current = {
      transactionId: original,
      originalTransactionId: original,
      productId: PRO,
      type: 'Auto-Renewable Subscription' as const,
      appAccountToken: userId,
      expiresDate: Date.now() + 20 * DAY,
    };
    await notify('SUBSCRIBED', { transaction: current });
    assert.equal(await h.tier(userId), 'pro');
    assert.equal(await h.balance(userId), 1000);
    await notify('REFUND', { transaction: { ...current, revocationDate: Date.now() } });
    assert.equal(await h.tier(userId), 'free');
    assert.equal(await h.balance(userId), 0);
  });

  it("REVOKE (family sharing withdrawn) ends the subscription's tier", async () => {
    const userId = await h.user();
    const original = String(6_000_000_000 + Math.floor(Math.random() * 1e8));
    const current = {
      transactionId: original,
      originalTransactionId: original,
      productId: PRO,
      type: 'Auto-Renewable Subscription' as const,
      appAccountToken: userId,
      expiresDate: Date.now() + 20 * DAY,
    };
    await notify('SUBSCRIBED', { transaction: current });
    assert.equal(await h.tier(userId), 'pro');
    await notify('REVOKE', { transaction: current });
    assert.equal(await h.tier(userId), 'free');
  });

  it('TEST is recorded and changes nothing', async () => {
    const body = await notify('TEST', {});
    assert.equal(body.outcome, 'ignored');
    assert.match(body.detail ?? '', /TEST/);
  });

  it('a renewal without appAccountToken reaches the user the app posted the subscription for; one nobody posted is unmatched', async () => {
    const userId = await h.user();
    const original = String(7_000_000_000 + Math.floor(Math.random() * 1e8));
    const first = {
      transactionId: original,
      originalTransactionId: original,
      productId: PRO,
      type: 'Auto-Renewable Subscription' as const,
      expiresDate: Date.now() + 30 * DAY,
    };
    assert.equal((await h.postTransaction(userId, await signed(first))).body.outcome, 'applied');
    await h.settled();
    assert.equal(await h.balance(userId), 1000);
    await notify('DID_RENEW', { transaction: { ...first, transactionId: `${original}9` } });
    assert.equal(await h.balance(userId), 2000);

    const stranger = await notify('DID_RENEW', { transaction: { ...first, transactionId: '8000000001', originalTransactionId: '8000000000' } });
    assert.equal(stranger.outcome, 'unmatched');
    // Its app posts that transaction later: the user is known from then on, and the period is granted.
    const late = await h.user();
    await h.postTransaction(late, await signed({ ...first, transactionId: '8000000001', originalTransactionId: '8000000000' }));
    await h.settled();
    assert.equal(await h.balance(late), 1000);
    assert.equal(await h.tier(late), 'pro');
  });
});
