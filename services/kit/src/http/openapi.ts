import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import Router from '@koa/router';
import type { Context } from 'koa';
import { z } from 'zod';
import { createDocument, type ZodOpenApiOperationObject, type ZodOpenApiPathsObject, type ZodOpenApiResponseObject } from 'zod-openapi';
import { type RouteDefinition, STRICT_PATHS } from './routes.ts';

// Loose: RFC 9457 lets a problem carry extension members (a 402's `required` and `available`, a webhook's `reason`).
export const ProblemSchema = z
  .looseObject({
    type: z.string(),
    title: z.string(),
    status: z.number().int(),
    detail: z.string(),
    instance: z.string().optional(),
    errors: z.array(z.object({ path: z.string(), message: z.string() })).optional(),
  })
  .meta({ id: 'Problem', description: 'RFC 9457 problem details' });

const SECURITY_SCHEMES = {
  ServiceKey: { type: 'apiKey', in: 'header', name: 'X-Service-Key' },
  AdminKey: { type: 'apiKey', in: 'header', name: 'X-Admin-Key' },
  WriterToken: { type: 'http', scheme: 'bearer', description: 'A graph writer token from WRITER_TOKENS' },
  BearerJWT: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT' },
  ApiKey: { type: 'apiKey', in: 'header', name: 'X-API-Key' },
  UserId: { type: 'apiKey', in: 'header', name: 'X-User-ID', description: 'The end user the gateway acts for; believed only beside a valid X-Service-Key' },
} as const;

const problem = (description: string) => ({
  description,
  content: { 'application/problem+json': { schema: ProblemSchema } },
});

function operation(route: RouteDefinition): ZodOpenApiOperationObject {
  const body = route.body ?? route.documentedBody;
  const responses: Record<string, ZodOpenApiResponseObject> = {};
  for (const [status, spec] of Object.entries(route.responses)) {
    // Every failure is a problem document, so a route names only why it fails.
    if (Number(status) >= 400 && !spec.schema) responses[status] = problem(spec.description);
    else
      responses[status] = {
        description: spec.description,
        ...(spec.schema ? { content: { [spec.contentType ?? 'application/json']: { schema: spec.schema } } } : {}),
        ...(spec.links ? { links: spec.links } : {}),
        ...(spec.headers ? { headers: spec.headers } : {}),
      };
  }
  if (route.query || route.params || route.headers || body) responses['422'] ??= problem('A parameter or body field is invalid');
  if (body) {
    responses['400'] ??= problem('The body is not valid JSON');
    responses['413'] ??= problem('The body is larger than the limit');
    responses['415'] ??= problem('The body is not application/json');
  }
  if (route.security?.length) {
    responses['401'] ??= problem('Missing or invalid credentials');
    responses['403'] ??= problem('Authenticated, but with a credential this operation does not accept');
  }
  responses['429'] ??= problem('Rate limit exceeded; see Retry-After');
  return {
    operationId: route.operationId,
    summary: route.summary,
    ...(route.description ? { description: route.description } : {}),
    tags: route.tags,
    ...(route.security?.length ? { security: route.security.map((scheme) => ({ [scheme]: [] })) } : { security: [] }),
    ...(route.query || route.params || route.headers
      ? {
          requestParams: {
            ...(route.query ? { query: route.query } : {}),
            ...(route.params ? { path: route.params } : {}),
            ...(route.headers ? { header: route.headers } : {}),
          },
        }
      : {}),
    ...(body ? { requestBody: { required: true, content: { 'application/json': { schema: body } } } } : {}),
    responses: responses as ZodOpenApiOperationObject['responses'],
  };
}

export function buildOpenApi(info: { title: string; version: string; description: string }, routes: RouteDefinition[]) {
  const paths: ZodOpenApiPathsObject = {};
  for (const route of routes) {
    paths[route.path] = { ...paths[route.path], [route.method]: operation(route) };
  }
  const used = new Set(routes.flatMap((route) => route.security ?? []));
  const securitySchemes = Object.fromEntries(Object.entries(SECURITY_SCHEMES).filter(([name]) => used.has(name)));
  return createDocument({ openapi: '3.1.0', info, paths, components: { securitySchemes } });
}

const require = createRequire(import.meta.url);
const swaggerDir = dirname(require.resolve('swagger-ui-dist/package.json'));
const redocBundle = join(dirname(require.resolve('redoc/package.json')), 'bundles', 'redoc.standalone.js');

/** Files served from the installed packages: the UIs work offline, with no CDN. */
const ASSETS: Record<string, { file: string; type: string }> = {
  'swagger-ui.css': { file: join(swaggerDir, 'swagger-ui.css'), type: 'text/css' },
  'swagger-ui-bundle.js': { file: join(swaggerDir, 'swagger-ui-bundle.js'), type: 'application/javascript' },
  'swagger-ui-standalone-preset.js': { file: join(swaggerDir, 'swagger-ui-standalone-preset.js'), type: 'application/javascript' },
  'redoc.standalone.js': { file: redocBundle, type: 'application/javascript' },
};

const page = (title: string, head: string, body: string) =>
  `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>${title}</title>${head}</head><body>${body}</body></html>`;

/** `/openapi.json`, `/docs` (Swagger UI) and `/redoc`, for a document built once at start-up. */
export function docsRouter(document: object, title: string): Router {
  const router = new Router(STRICT_PATHS);
  const json = JSON.stringify(document);
  router.get('/openapi.json', (ctx: Context) => {
    ctx.type = 'application/json';
    ctx.body = json;
  });
  router.get('/docs', (ctx: Context) => {
    ctx.type = 'html';
    ctx.body = page(
      `${title} · API`,
      '<link rel="stylesheet" href="/docs/assets/swagger-ui.css">',
      '<div id="ui"></div><script src="/docs/assets/swagger-ui-bundle.js"></script><script src="/docs/assets/swagger-ui-standalone-preset.js"></script>' +
        "<script>window.ui = SwaggerUIBundle({ url: '/openapi.json', dom_id: '#ui', deepLinking: true, presets: [SwaggerUIBundle.presets.apis, SwaggerUIStandalonePreset], layout: 'StandaloneLayout' });</script>",
    );
  });
  router.get('/redoc', (ctx: Context) => {
    ctx.type = 'html';
    ctx.body = page(`${title} · reference`, '', '<redoc spec-url="/openapi.json"></redoc><script src="/docs/assets/redoc.standalone.js"></script>');
  });
  router.get('/docs/assets/:file', (ctx: Context) => {
    const asset = ASSETS[String(ctx.params.file)];
    if (!asset) return;
    ctx.type = asset.type;
    ctx.set('Cache-Control', 'public, max-age=86400');
    ctx.body = readFileSync(asset.file);
  });
  return router;
}
