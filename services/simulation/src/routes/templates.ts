import { defineRoute, listEnvelope, notFound, pageQuery, type RouteDefinition } from '@tempora/kit/http';
import { z } from 'zod';
import { type TemplateCatalog, TemplateSchema } from '../domain/templates.ts';
import { templateSummary } from '../views.ts';

const TemplateSummarySchema = z
  .object({ id: z.string(), title: z.string(), mode: z.string(), domain: z.string(), tier: z.string(), cost_estimate_usd: z.record(z.string(), z.number()) })
  .passthrough()
  .meta({ id: 'SimulationTemplateSummary' });

const TemplateFileSchema = TemplateSchema.meta({ id: 'SimulationTemplate' });

/** The templates are public: they describe what can be run, not anyone's runs. */
export function templateRoutes(catalog: TemplateCatalog): RouteDefinition[] {
  return [
    defineRoute({
      method: 'get',
      path: '/api/v1/simulate/templates',
      operationId: 'listSimulationTemplates',
      security: [],
      summary: 'The 21 templates, with their entities, timepoints, default mode and mechanisms, tier and cost per fidelity',
      description: 'In the list envelope, ordered by id. The default `limit` (50) holds every template in one page.',
      tags: ['templates'],
      // Default above the 21 templates: a client that does not page still gets them all.
      query: pageQuery(50, 100).extend({
        mode: z
          .preprocess(
            (value) => (typeof value === 'string' ? value.toUpperCase() : value),
            z.enum(['FORWARD', 'PORTAL', 'BRANCHING', 'CYCLICAL', 'DIRECTORIAL']),
          )
          .optional(),
        domain: z.enum(['history', 'business', 'science']).optional(),
      }),
      responses: {
        200: {
          description: 'The templates (filtered by mode or domain when asked), one page of them',
          schema: listEnvelope(TemplateSummarySchema).meta({ id: 'SimulationTemplateList' }),
        },
      },
      handler: (_ctx, { query }) => {
        const matching = catalog
          .list()
          .filter((template) => (!query.mode || template.mode === query.mode) && (!query.domain || template.domain === query.domain));
        return {
          items: matching.slice(query.offset, query.offset + query.limit).map(templateSummary),
          total: matching.length,
          limit: query.limit,
          offset: query.offset,
        };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/api/v1/simulate/templates/{id}',
      operationId: 'getSimulationTemplate',
      security: [],
      summary: 'One template in full (knowledge, relationships, mode settings)',
      tags: ['templates'],
      params: z.object({ id: z.string().regex(/^[a-z0-9-]{1,64}$/) }),
      responses: {
        200: { description: 'The template file as shipped (its defaults filled in)', schema: TemplateFileSchema },
        404: { description: 'No such template' },
      },
      handler: (_ctx, { params }) => {
        const template = catalog.get(params.id);
        if (!template) throw notFound(`no template ${params.id}`);
        return template;
      },
    }),
  ];
}
