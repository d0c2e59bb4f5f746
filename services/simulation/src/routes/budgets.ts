import { defineRoute, listEnvelope, notFound, Problem, pageQuery, type RouteDefinition } from '@tempora/kit/http';
import { z } from 'zod';
import { ANY_CALLER, callerOf, requireServiceLevel } from '../auth.ts';
import type { BudgetStanding } from '../budget-standing.ts';
import { BudgetViewSchema, UsageSchema } from '../schemas.ts';

const day = z.iso.date().meta({ description: 'YYYY-MM-DD (UTC)' });

/** The first of this month and of the next, in UTC. */
function thisMonth(now = new Date()): { from: Date; to: Date } {
  return { from: new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1)), to: new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1)) };
}

export function budgetRoutes(budgets: BudgetStanding): RouteDefinition[] {
  return [listBudgetsRoute(budgets), getBudgetRoute(budgets), usageRoute(budgets)];
}

/** Every budget's standing, for the operator. */
function listBudgetsRoute(budgets: BudgetStanding): RouteDefinition {
  return defineRoute({
    method: 'get',
    path: '/api/v1/simulations/budgets',
    operationId: 'listSimulationBudgets',
    summary: 'Every SimulationBudget in force: spent, reserved and remaining in its current period (for services: the operator reads this)',
    description:
      'Only for a service acting as itself (X-Service-Key without X-User-ID, or a service token). In the list envelope, ordered by name. `errors` names budget files that did not parse (each keeps its last good version).',
    tags: ['budgets'],
    security: ANY_CALLER,
    query: pageQuery(100, 500),
    responses: {
      200: {
        description: 'The budgets',
        schema: listEnvelope(BudgetViewSchema).extend({
          errors: z.array(z.object({ budget: z.string(), error: z.string() })),
          loaded_at: z.string().nullable(),
        }),
      },
      403: { description: 'Not a service acting as itself' },
    },
    handler: async (ctx, { query }) => {
      requireServiceLevel(callerOf(ctx));
      const { items, total, errors, loaded_at } = await budgets.page(query);
      return { items, total, limit: query.limit, offset: query.offset, errors, loaded_at };
    },
  });
}

/** One budget's standing, in any of its periods. */
function getBudgetRoute(budgets: BudgetStanding): RouteDefinition {
  return defineRoute({
    method: 'get',
    path: '/api/v1/simulations/budgets/{name}',
    operationId: 'getSimulationBudget',
    summary: "One budget's standing, in its current period or in `period`",
    tags: ['budgets'],
    security: ANY_CALLER,
    params: z.object({ name: z.string().min(1).max(253) }),
    query: z.object({
      period: z
        .string()
        .regex(/^\d{4}-\d{2}(-\d{2})?$/)
        .optional()
        .meta({ description: 'YYYY-MM-DD (daily budgets) or YYYY-MM (monthly)' }),
    }),
    responses: {
      200: { description: 'The budget', schema: BudgetViewSchema },
      403: { description: 'Not a service acting as itself' },
      404: { description: 'No such budget' },
      422: { description: 'A period of the wrong form for the budget' },
    },
    handler: async (ctx, { params, query }) => {
      requireServiceLevel(callerOf(ctx));
      const budget = budgets.named(params.name);
      if (!budget) throw notFound(`no budget ${params.name}`);
      if (query.period && query.period.length !== (budget.period === 'daily' ? 10 : 7)) {
        throw new Problem(422, `budget ${budget.name} is ${budget.period}: its periods are ${budget.period === 'daily' ? 'YYYY-MM-DD' : 'YYYY-MM'}`, {
          errors: [{ path: 'query.period', message: 'wrong form for this budget' }],
        });
      }
      return budgets.status(budget, query.period);
    },
  });
}

/** What runs spent, the caller's own or, for a service, anyone's. */
function usageRoute(budgets: BudgetStanding): RouteDefinition {
  return defineRoute({
    method: 'get',
    path: '/api/v1/simulations/usage',
    operationId: 'getSimulationUsage',
    summary: 'Usage: runs, dollars, tokens and calls by model, between two dates',
    description: "The caller's own usage. A service acting as itself may ask for any `user`, for a `budget` (the runs charged to it), or for everyone.",
    tags: ['budgets'],
    security: ANY_CALLER,
    query: z.object({
      from: day.optional().meta({ description: 'first day included; default the first of this month' }),
      to: day.optional().meta({ description: 'first day not included; default the first of next month' }),
      user: z.string().min(1).max(128).optional(),
      budget: z.string().min(1).max(253).optional(),
    }),
    responses: {
      200: { description: 'The usage', schema: UsageSchema },
      403: { description: "Another user's or a budget's usage asked for by a caller that is not a service" },
      422: { description: '`from` not before `to`' },
    },
    handler: async (ctx, { query }) => {
      const caller = callerOf(ctx);
      if ((query.user && query.user !== caller.owner) || query.budget) requireServiceLevel(caller);
      const month = thisMonth();
      const from = query.from ? new Date(`${query.from}T00:00:00Z`) : month.from;
      const to = query.to ? new Date(`${query.to}T00:00:00Z`) : month.to;
      if (from >= to) throw new Problem(422, '`from` must be before `to`', { errors: [{ path: 'query.from', message: 'must be before to' }] });
      const owner = caller.service ? query.user : caller.owner;
      return budgets.usage({ ...(owner ? { owner } : {}), ...(query.budget ? { budget: query.budget } : {}), from, to });
    },
  });
}
