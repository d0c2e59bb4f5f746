import { z } from 'zod';

/** The gateway's rate-limit tiers, in order of what they allow. */
export const TIERS = ['free', 'pro', 'enterprise'] as const;
export type Tier = (typeof TIERS)[number];
export const tierRank = (tier: Tier) => TIERS.indexOf(tier);

const id = z.string().regex(/^[a-z0-9][a-z0-9_-]{0,63}$/, 'lower-case letters, digits, _ and -');
const Price = z.object({
  /** In the currency's minor unit (cents). */
  amount: z.number().int().min(50).max(100_000_000),
  currency: z
    .string()
    .regex(/^[a-z]{3}$/, 'an ISO 4217 code in lower case')
    .default('usd'),
});
const providerIds = {
  /** A Stripe Price id; unset: Checkout is created with inline price data. */
  stripe_price: z.string().min(1).optional(),
  /** The App Store product id of the same item. */
  apple_product_id: z.string().min(1).optional(),
};

export const PackSchema = z.object({ id, name: z.string().min(1).max(100), credits: z.number().int().min(1).max(10_000_000), price: Price, ...providerIds });
export const PlanSchema = z.object({
  id,
  name: z.string().min(1).max(100),
  tier: z.enum(['pro', 'enterprise']),
  monthly_credits: z.number().int().min(0).max(10_000_000),
  price: Price,
  ...providerIds,
});
export type Pack = z.output<typeof PackSchema>;
export type Plan = z.output<typeof PlanSchema>;

export const CatalogueSchema = z.object({ packs: z.array(PackSchema).max(50), plans: z.array(PlanSchema).max(20) }).superRefine((catalogue, ctx) => {
  const seen = new Map<string, string>();
  const claim = (value: string | undefined, what: string, path: (string | number)[]) => {
    if (value === undefined) return;
    const previous = seen.get(`${what}:${value}`);
    if (previous) ctx.addIssue({ code: 'custom', path, message: `${what} ${value} is also used by ${previous}` });
    else seen.set(`${what}:${value}`, path.join('.'));
  };
  catalogue.packs.forEach((pack, i) => {
    claim(pack.id, 'id', ['packs', i, 'id']);
    claim(pack.stripe_price, 'stripe_price', ['packs', i, 'stripe_price']);
    claim(pack.apple_product_id, 'apple_product_id', ['packs', i, 'apple_product_id']);
  });
  catalogue.plans.forEach((plan, i) => {
    claim(plan.id, 'id', ['plans', i, 'id']);
    claim(plan.stripe_price, 'stripe_price', ['plans', i, 'stripe_price']);
    claim(plan.apple_product_id, 'apple_product_id', ['plans', i, 'apple_product_id']);
  });
});
export type CatalogueData = z.output<typeof CatalogueSchema>;

/** What is on sale when BILLING_CATALOGUE is unset (docs/billing.md). */
export const DEFAULT_CATALOGUE: CatalogueData = {
  packs: [
    { id: 'starter', name: 'Starter pack', credits: 100, price: { amount: 499, currency: 'usd' }, apple_product_id: 'dev.tempora.credits.starter' },
    { id: 'explorer', name: 'Explorer pack', credits: 500, price: { amount: 1999, currency: 'usd' }, apple_product_id: 'dev.tempora.credits.explorer' },
    { id: 'historian', name: 'Historian pack', credits: 1500, price: { amount: 4999, currency: 'usd' }, apple_product_id: 'dev.tempora.credits.historian' },
  ],
  plans: [
    { id: 'pro', name: 'Pro', tier: 'pro', monthly_credits: 1000, price: { amount: 999, currency: 'usd' }, apple_product_id: 'dev.tempora.plan.pro' },
    {
      id: 'enterprise',
      name: 'Enterprise',
      tier: 'enterprise',
      monthly_credits: 10_000,
      price: { amount: 9900, currency: 'usd' },
      apple_product_id: 'dev.tempora.plan.enterprise',
    },
  ],
};

export type Item = { kind: 'pack'; pack: Pack } | { kind: 'plan'; plan: Plan };

/** The configured packs and plans, looked up by our ids and by each provider's. */
export class Catalogue {
  readonly packs: readonly Pack[];
  readonly plans: readonly Plan[];
  constructor(data: CatalogueData) {
    this.packs = data.packs;
    this.plans = data.plans;
  }
  pack(packId: string): Pack | undefined {
    return this.packs.find((pack) => pack.id === packId);
  }
  plan(planId: string): Plan | undefined {
    return this.plans.find((plan) => plan.id === planId);
  }
  planByStripePrice(priceId: string): Plan | undefined {
    return this.plans.find((plan) => plan.stripe_price === priceId);
  }
  byAppleProduct(productId: string): Item | undefined {
    const pack = this.packs.find((candidate) => candidate.apple_product_id === productId);
    if (pack) return { kind: 'pack', pack };
    const plan = this.plans.find((candidate) => candidate.apple_product_id === productId);
    return plan ? { kind: 'plan', plan } : undefined;
  }
}
