import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { AccountDeletionSchema, AccountExportPageSchema, encodeExportCursor } from '@tempora/kit/http';
import { signJws, transaction } from '../../../test/support/stand-ins/apple.ts';
import { stripeEvent } from '../../../test/support/stand-ins/stripe.ts';
import { asUser, type BillingHarness, buy, STRIPE_WEBHOOK, service, useBilling } from './harness.ts';

const DATA = (userId: string) => `/api/v1/users/${userId}/data`;

describe('billing: account data (deletion and export)', function () {
  this.timeout(60_000);
  let h: BillingHarness;
  useBilling((started) => {
    h = started;
  });

  const rowsOf = async (userId: string) => {
    const counts = await Promise.all(
      ['billing_subscriptions', 'billing_payments', 'billing_accounts', 'billing_outbox', 'billing_history', 'billing_events'].map(
        async (table) => [table, Number((await h.db(table).where({ user_id: userId }).count<{ count: string }[]>('* as count'))[0]!.count)] as const,
      ),
    );
    return Object.fromEntries(counts);
  };
  const erase = async (userId: string) => {
    const reply = await h.call('DELETE', DATA(userId), { headers: service });
    assert.equal(reply.status, 200, JSON.stringify(reply.body));
    return AccountDeletionSchema.parse(reply.body);
  };
  /** Every page of a user's export, `limit` items a page, as the gateway reads them: the items by kind. */
  const exportAll = async (userId: string, limit: number) => {
    const seen: Record<string, Record<string, unknown>[]> = {};
    let cursor: string | null | undefined;
    let pages = 0;
    do {
      const query = cursor ? `?limit=${limit}&cursor=${encodeURIComponent(cursor)}` : `?limit=${limit}`;
      const reply = await h.call('GET', `${DATA(userId)}${query}`, { headers: service });
      assert.equal(reply.status, 200, JSON.stringify(reply.body));
      const page = AccountExportPageSchema.parse(reply.body);
      assert.equal(page.service, 'billing');
      assert.ok(page.items.length <= limit);
      (seen[page.kind] ??= []).push(...page.items);
      cursor = page.next_cursor;
      pages += 1;
      assert.ok(pages < 50, 'the export ends');
    } while (cursor);
    return seen;
  };

  it('deletes a subscriber: the plan cancelled at Stripe, payments kept without the user, the rest gone; later events change nothing', async () => {
    const userId = await h.user();
    const { subscriptionId } = await buy(h, userId, 'plan', 'pro');
    const { session } = await buy(h, userId, 'pack', 'starter');
    const paymentIntent = h.stripe.events.find((event) => event.type === 'checkout.session.completed' && event.data.object.id === session.id)!.data.object
      .payment_intent as string;
    await h.settled();
    assert.equal(await h.balance(userId), 1100);
    const before = await rowsOf(userId);
    assert.equal(before.billing_payments, 2);

    const answer = await erase(userId);
    assert.equal(answer.service, 'billing');
    assert.deepEqual(answer.kept.payments!.count, 2);
    assert.match(answer.kept.payments!.reason, /accounting/);
    assert.equal(answer.deleted.subscriptions, 1);
    assert.equal(answer.deleted.accounts, 1);
    assert.equal(answer.deleted.outbox, before.billing_outbox);
    assert.equal(answer.deleted.history, before.billing_history);
    assert.equal(answer.deleted.events, before.billing_events);
    assert.equal(answer.notes.length, 1);
    assert.match(answer.notes[0]!, /Pro plan paid through Stripe was cancelled/);

    // Nothing keyed by the user is left; the payments are there for the books, without the user.
    assert.deepEqual(Object.values(await rowsOf(userId)), [0, 0, 0, 0, 0, 0]);
    const kept = await h.db('billing_payments').where({ subscription_ref: subscriptionId }).orWhere({ payment_intent: paymentIntent });
    assert.equal(kept.length, 2);
    for (const payment of kept) {
      assert.equal(payment.user_id, null);
      assert.ok(Number(payment.amount) > 0 && payment.currency === 'usd' && payment.granted_at instanceof Date);
    }
    assert.equal(await h.db('billing_erasures').where({ digest: userId }).first(), undefined, 'the id itself is not kept');

    // Stripe ended the subscription, and its event is settled without a row or a grant for the deleted user.
    await h.stripe.idle();
    const deleted = h.stripe.events.filter((event) => event.type === 'customer.subscription.deleted' && event.data.object.id === subscriptionId);
    assert.equal(deleted.length, 1, 'cancelled at Stripe');
    assert.equal(deleted[0]!.data.object.status, 'canceled');
    assert.deepEqual(
      h.stripe.deliveries.filter((delivery) => delivery.event === deleted[0]!.id).map((delivery) => delivery.status),
      [200],
    );
    const recorded = await h.billing.repository.events.get('stripe', deleted[0]!.id);
    assert.equal(recorded?.outcome, 'ignored');
    assert.equal(recorded?.user_id, null);

    // A renewal invoice and a refund arriving afterwards: answered 200, nothing granted, debited or parked.
    const subscription = deleted[0]!.data.object;
    const invoice = stripeEvent('invoice.paid', {
      id: `in_test_${randomUUID().replaceAll('-', '')}`,
      object: 'invoice',
      billing_reason: 'subscription_cycle',
      amount_paid: 999,
      currency: 'usd',
      parent: { type: 'subscription_details', subscription_details: { subscription: subscriptionId, metadata: subscription.metadata } },
    });
    const late = await h.stripeEvent(invoice);
    assert.equal(late.status, 200);
    assert.equal(late.body.outcome, 'ignored');
    await h.stripe.act('refund', paymentIntent);
    await h.settled();
    assert.deepEqual(Object.values(await rowsOf(userId)), [0, 0, 0, 0, 0, 0]);
    assert.equal((await h.billing.repository.outbox.backlog()).failed, 0, 'nothing parked');
    assert.equal(await h.db('billing_subscriptions').where({ ref: subscriptionId }).first(), undefined, 'the subscription is not recreated');
    const refunded = await h.db('billing_payments').where({ payment_intent: paymentIntent }).first();
    assert.equal(Number(refunded.refunded_amount), 499, 'the refund is on the anonymised record');
    assert.equal(await h.balance(userId), 1100, 'the ledger saw nothing after the deletion');

    // Again: zero counts, the same notes.
    const again = await erase(userId);
    assert.deepEqual(again.deleted, { subscriptions: 0, accounts: 0, outbox: 0, history: 0, events: 0 });
    assert.equal(again.kept.payments!.count, 0);
    assert.deepEqual(again.notes, answer.notes);
  });

  it('tells an App Store subscriber to cancel with Apple, and keeps telling it', async () => {
    const userId = await h.user();
    const original = String(4_000_000_000 + Math.floor(Math.random() * 1e8));
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
    assert.equal(posted.status, 200, JSON.stringify(posted.body));
    const answer = await erase(userId);
    assert.equal(answer.deleted.subscriptions, 1);
    assert.equal(answer.kept.payments!.count, 1);
    assert.deepEqual(answer.notes, [
      "The Pro plan bought through the App Store renews through Apple, which cannot be cancelled from here: cancel it in Apple's subscription management (https://apps.apple.com/account/subscriptions).",
    ]);
    assert.deepEqual((await erase(userId)).notes, answer.notes);
  });

  it("answers 503 while Stripe cannot be reached, deleting nothing; the gateway's retry finishes even after Stripe ended the plan", async () => {
    const userId = await h.user();
    const { subscriptionId } = await buy(h, userId, 'plan', 'pro');
    await h.settled();
    h.stripe.setOutage(true);
    let reply;
    try {
      reply = await h.call('DELETE', DATA(userId), { headers: service });
    } finally {
      h.stripe.setOutage(false);
    }
    assert.equal(reply.status, 503);
    assert.match(reply.headers.get('content-type') ?? '', /problem\+json/);
    const after = await rowsOf(userId);
    assert.equal(after.billing_subscriptions, 1);
    assert.equal(after.billing_payments, 1);
    assert.equal(after.billing_accounts, 1);

    // The first attempt's cancel went through at Stripe but its answer was lost (and billing missed the event).
    h.stripe.setWebhookUrl(undefined);
    try {
      await h.stripe.act('cancel', subscriptionId!);
    } finally {
      h.stripe.setWebhookUrl(`${h.url}${STRIPE_WEBHOOK}`);
    }
    const answer = await erase(userId);
    assert.equal(answer.deleted.subscriptions, 1);
    assert.equal(answer.kept.payments!.count, 1);
    assert.match(answer.notes[0]!, /cancelled/);
    assert.deepEqual(Object.values(await rowsOf(userId)), [0, 0, 0, 0, 0, 0]);
  });

  it('deletes a user billing never saw, and answers any id of the contract', async () => {
    assert.deepEqual((await erase(randomUUID())).deleted, { subscriptions: 0, accounts: 0, outbox: 0, history: 0, events: 0 });
    const foreign = await erase('not-a-uuid');
    assert.equal(foreign.kept.payments!.count, 0);
  });

  it('exports payments, subscriptions and history page by page, nothing twice and nothing left out', async () => {
    const userId = await h.user();
    const { subscriptionId } = await buy(h, userId, 'plan', 'pro');
    await h.stripe.act('renew', subscriptionId!);
    await buy(h, userId, 'pack', 'starter');
    await buy(h, userId, 'pack', 'explorer');
    await h.settled();
    const expected = await rowsOf(userId);
    assert.equal(expected.billing_payments, 4);

    const seen = await exportAll(userId, 2);
    assert.deepEqual(Object.keys(seen), ['payments', 'subscriptions', 'history']);
    assert.equal(seen.payments!.length, 4);
    assert.equal(new Set(seen.payments!.map((item) => `${item.provider}:${item.ref}`)).size, 4);
    assert.deepEqual(seen.payments!.map((item) => item.amount).sort(), [1999, 499, 999, 999].sort());
    assert.equal(seen.subscriptions!.length, 1);
    assert.equal(seen.subscriptions![0]!.id, subscriptionId);
    assert.equal(seen.history!.length, expected.billing_history);
    assert.equal(new Set(seen.history!.map((item) => item.id)).size, expected.billing_history);

    // One page holds it all with the default limit; after the deletion only an empty export is left.
    await erase(userId);
    const empty = await h.call('GET', DATA(userId), { headers: service });
    assert.equal(empty.body.kind, 'payments');
    assert.deepEqual(empty.body.items, []);
  });

  it('exports each kind oldest first, to the microsecond, then by provider and ref byte by byte (history: by id as a number)', async () => {
    const userId = await h.user();
    // T1 and T2 are one microsecond apart, within one millisecond; several rows share T2.
    const [T0, T1, T2, T3] = ['2026-03-01T09:00:00.000000Z', '2026-03-01T10:00:00.000499Z', '2026-03-01T10:00:00.000500Z', '2026-03-01T10:00:01.000000Z'];
    const payments = [
      ['stripe', 'pi_zz', T3],
      ['stripe', 'pi_b', T2],
      ['stripe', 'x:y', T2],
      ['stripe', 'x:z', T2],
      ['apple', '900', T2],
      ['stripe', 'pi_B', T2],
      ['apple', '100', T1],
      ['stripe', 'pi_a', T0],
    ] as const;
    await h.db('billing_payments').insert(payments.map(([provider, ref, created_at]) => ({ provider, ref, created_at, user_id: userId, credits: 1 })));
    const subscriptions = [
      ['stripe', 'sub_a', T3],
      ['stripe', 'sub_c', T2],
      ['apple', '5', T2],
      ['stripe', 'sub_b', T1],
    ] as const;
    await h
      .db('billing_subscriptions')
      .insert(subscriptions.map(([provider, ref, created_at]) => ({ provider, ref, created_at, user_id: userId, status: 'canceled', version: 1 })));
    // Ids of different lengths: as text, 100000000 would come before 99000000.
    const history = [
      [99_999, T3],
      [100_000_000, T2],
      [99_000_001, T2],
      [99_000_000, T2],
      [1_000_000_000, T1],
    ] as const;
    await h.db('billing_history').insert(history.map(([id, created_at]) => ({ id, created_at, user_id: userId, kind: 'test', description: `entry ${id}` })));

    const seen = await exportAll(userId, 2);
    assert.deepEqual(
      seen.payments!.map((item) => `${item.provider}:${item.ref}`),
      ['stripe:pi_a', 'apple:100', 'apple:900', 'stripe:pi_B', 'stripe:pi_b', 'stripe:x:y', 'stripe:x:z', 'stripe:pi_zz'],
    );
    assert.deepEqual(
      seen.payments!.map((item) => item.created_at),
      [T0, T1, T2, T2, T2, T2, T2, T3].map((at) => new Date(at).toISOString()),
    );
    assert.deepEqual(
      seen.subscriptions!.map((item) => `${item.provider}:${item.id}`),
      ['stripe:sub_b', 'apple:5', 'stripe:sub_c', 'stripe:sub_a'],
    );
    assert.deepEqual(
      seen.history!.map((item) => item.id),
      ['1000000000', '99000000', '99000001', '100000000', '99999'],
    );
    for (const item of Object.values(seen).flat()) assert.ok(!('position_at' in item), 'items keep their shape');

    // A position of the old form (an id alone) is not one this export hands out any more.
    for (const [kind, after] of [
      [0, 'stripe:pi_a'],
      [0, randomUUID()],
      [1, 'stripe:sub_b'],
      [2, '99999'],
      // Of the new form, but with what PostgreSQL cannot take: a NUL in a ref, year 0.
      [0, '2026-01-01T00:00:00.000000Z/stripe:pi_\u0000'],
      [2, '0000-01-01T00:00:00.000000Z/1'],
    ] as const) {
      const reply = await h.call('GET', `${DATA(userId)}?cursor=${encodeExportCursor({ kind, after })}`, { headers: service });
      assert.equal(reply.status, 400, `${kind} ${after}`);
    }
  });

  it('refuses what the contract does not allow', async () => {
    const userId = await h.user();
    assert.equal((await h.call('DELETE', DATA(userId))).status, 401);
    assert.equal((await h.call('GET', DATA(userId))).status, 401);
    assert.equal((await h.call('DELETE', DATA(userId), { headers: asUser(userId) })).status, 403, "a user's request forwarded by the gateway");
    assert.equal((await h.call('GET', DATA(userId), { headers: asUser(userId) })).status, 403);
    for (const cursor of ['garbage!', encodeExportCursor({ kind: 0, after: 'no-colon' }), encodeExportCursor({ kind: 2, after: '12x' })]) {
      const reply = await h.call('GET', `${DATA(userId)}?cursor=${encodeURIComponent(cursor)}`, { headers: service });
      assert.equal(reply.status, 400, cursor);
      assert.match(reply.headers.get('content-type') ?? '', /problem\+json/);
    }
    for (const limit of ['0', '501', 'many']) assert.equal((await h.call('GET', `${DATA(userId)}?limit=${limit}`, { headers: service })).status, 422, limit);
    assert.equal((await h.call('DELETE', DATA('x'.repeat(129)), { headers: service })).status, 422);
    // A cursor past the last kind is an empty, final page.
    const past = await h.call('GET', `${DATA(userId)}?cursor=${encodeExportCursor({ kind: 9, after: '' })}`, { headers: service });
    assert.equal(past.status, 200);
    assert.equal(past.body.next_cursor, null);
  });
});
