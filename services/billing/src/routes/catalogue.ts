import { defineRoute, pageQuery, type RouteDefinition } from '@tempora/kit/http';
import { PackListSchema, PlanListSchema } from '../schemas.ts';
import { packView, pageOf, planView } from '../views.ts';
import { type BillingRouteDeps, SERVICE } from './context.ts';

/** A page of the catalogue holds the whole of it by default: it has at most 50 packs and 20 plans. */
const CataloguePage = pageQuery(100);

export function catalogueRoutes(deps: BillingRouteDeps): RouteDefinition[] {
  const { catalogue } = deps;
  return [
    defineRoute({
      method: 'get',
      path: '/api/v1/billing/packs',
      operationId: 'listPacks',
      summary: 'Credit packs on sale',
      description: "From BILLING_CATALOGUE, in its order, in the list envelope. Prices in the currency's minor unit.",
      tags: ['catalogue'],
      security: [SERVICE],
      query: CataloguePage,
      responses: { 200: { description: 'A page of the packs', schema: PackListSchema } },
      handler: (_ctx, { query }) => pageOf(catalogue.packs, packView, query),
    }),
    defineRoute({
      method: 'get',
      path: '/api/v1/billing/plans',
      operationId: 'listPlans',
      summary: 'Monthly plans on sale',
      description:
        "Each plan sets the gateway tier while it is paid and grants its monthly credits with every paid period. In the catalogue's order, in the list envelope.",
      tags: ['catalogue'],
      security: [SERVICE],
      query: CataloguePage,
      responses: { 200: { description: 'A page of the plans', schema: PlanListSchema } },
      handler: (_ctx, { query }) => pageOf(catalogue.plans, planView, query),
    }),
  ];
}
