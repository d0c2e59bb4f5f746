import { z } from 'zod';
import { defineRoute, type RouteDefinition } from '@tempora/kit/http';
import { PackViewSchema, PlanViewSchema } from '../schemas.ts';
import { packView, planView } from '../views.ts';
import { SERVICE, type BillingRouteDeps } from './context.ts';

export function catalogueRoutes(deps: BillingRouteDeps): RouteDefinition[] {
  const { catalogue } = deps;
  return [
    defineRoute({
      method: 'get',
      path: '/api/v1/billing/packs',
      operationId: 'listPacks',
      summary: 'Credit packs on sale',
      description: 'From BILLING_CATALOGUE. Prices in the currency\'s minor unit.',
      tags: ['catalogue'],
      security: [SERVICE],
      responses: { 200: { description: 'The packs', schema: z.object({ items: z.array(PackViewSchema) }) } },
      handler: () => ({ items: catalogue.packs.map(packView) }),
    }),
    defineRoute({
      method: 'get',
      path: '/api/v1/billing/plans',
      operationId: 'listPlans',
      summary: 'Monthly plans on sale',
      description: 'Each plan sets the gateway tier while it is paid and grants its monthly credits with every paid period.',
      tags: ['catalogue'],
      security: [SERVICE],
      responses: { 200: { description: 'The plans', schema: z.object({ items: z.array(PlanViewSchema) }) } },
      handler: () => ({ items: catalogue.plans.map(planView) }),
    }),
  ];
}
