import assert from 'node:assert/strict';
import { creditsToTakeBack } from '../src/domain/adjustments.ts';
import { minorUnits } from '../src/domain/apple-events.ts';
import { Catalogue, CatalogueSchema, DEFAULT_CATALOGUE } from '../src/domain/catalogue.ts';
import { accessUntil, effectiveTier, type SubscriptionState, supersedes } from '../src/domain/tiers.ts';

const DAY = 86_400_000;
const catalogue = new Catalogue(DEFAULT_CATALOGUE);
const state = (fields: Partial<SubscriptionState>): SubscriptionState => ({
  plan_id: 'pro',
  status: 'active',
  version: 1000,
  past_due_since: null,
  grace_until: null,
  ...fields,
});

describe('billing domain', () => {
  it("orders subscription states by the provider's clock; a terminal state holds against its own instant", () => {
    assert.equal(supersedes(undefined, { version: 1 }), true);
    assert.equal(supersedes(state({ version: 1000 }), { version: 999 }), false);
    assert.equal(supersedes(state({ version: 1000 }), { version: 1001 }), true);
    assert.equal(supersedes(state({ version: 1000 }), { version: 1000 }), true);
    assert.equal(supersedes(state({ version: 1000, status: 'canceled' }), { version: 1000 }), false);
  });

  it('gives the best tier of the subscriptions that give one; past due within its window only', () => {
    const now = new Date();
    assert.equal(effectiveTier([], catalogue, now, 14 * DAY), 'free');
    assert.equal(effectiveTier([state({}), state({ plan_id: 'enterprise', status: 'canceled' })], catalogue, now, 14 * DAY), 'pro');
    assert.equal(effectiveTier([state({ plan_id: 'enterprise', status: 'trialing' }), state({})], catalogue, now, 14 * DAY), 'enterprise');
    const pastDue = state({ status: 'past_due', past_due_since: new Date(now.getTime() - 13 * DAY) });
    assert.equal(effectiveTier([pastDue], catalogue, now, 14 * DAY), 'pro');
    assert.equal(effectiveTier([pastDue], catalogue, new Date(now.getTime() + 2 * DAY), 14 * DAY), 'free');
    const grace = state({ status: 'past_due', past_due_since: now, grace_until: new Date(now.getTime() + DAY) });
    assert.equal(accessUntil(grace, 14 * DAY)?.getTime(), now.getTime() + DAY, "the provider's grace period wins");
    assert.equal(effectiveTier([state({ plan_id: 'gone' })], catalogue, now, DAY), 'free', 'a plan no longer in the catalogue gives no tier');
  });

  it('takes back the refunded share rounded up, everything while disputed or revoked', () => {
    const payment = { credits: 500, refunded_amount: 0, refunded_of: 1999, disputed: false, revoked: false };
    assert.equal(creditsToTakeBack(payment), 0);
    assert.equal(creditsToTakeBack({ ...payment, refunded_amount: 1 }), 1);
    assert.equal(creditsToTakeBack({ ...payment, refunded_amount: 500 }), 126);
    assert.equal(creditsToTakeBack({ ...payment, refunded_amount: 1999 }), 500);
    assert.equal(creditsToTakeBack({ ...payment, disputed: true }), 500);
    assert.equal(creditsToTakeBack({ ...payment, revoked: true, refunded_of: null }), 500);
  });

  it("reads Apple's milliunit prices in each currency's minor unit", () => {
    assert.equal(minorUnits(4990, 'USD'), 499);
    assert.equal(minorUnits(120000, 'JPY'), 120);
    assert.equal(minorUnits(4990, undefined), null);
    assert.equal(minorUnits(4990, 'not a currency'), null);
  });

  it('refuses a catalogue whose ids or provider products repeat', () => {
    const pack = DEFAULT_CATALOGUE.packs[0]!;
    const twice = CatalogueSchema.safeParse({ packs: [pack, { ...pack, id: 'other' }], plans: [] });
    assert.equal(twice.success, false);
    assert.match(JSON.stringify(twice.error?.issues), /apple_product_id dev\.tempora\.credits\.starter is also used/);
    assert.equal(CatalogueSchema.safeParse(DEFAULT_CATALOGUE).success, true);
  });
});
