import { context, propagation } from '@opentelemetry/api';
import { defineRoute, linksTo, notFound, type ProblemFieldError, type RouteDefinition, unprocessable, zodIssues } from '@tempora/kit/http';
import { tdfHash } from '@tempora/kit/moments';
import { z } from 'zod';
import { MomentInput, momentPath } from '../domain/moment.ts';
import type { GraphService } from '../graph-service.ts';
import { MissingTargetError, type RenderJobRow } from '../repository/index.ts';
import { GenerateResultSchema, IngestResultSchema, RenderJobSchema, TdfIngestRecord } from '../schemas.ts';
import { type GraphRouteDeps, mayReadRenderJob } from './context.ts';
import { graphAliases } from './params.ts';

export const MAX_INGEST_BATCH = 1000;

/** POST /generate: a moment to record at layer 0 and render through the generation service. */
export const GenerateBody = z.object({
  path: momentPath,
  event_name: z.string().trim().min(1).max(200),
  query: z.string().trim().min(3).max(500).optional().meta({ description: 'what to render; default the event name' }),
  preset: z.enum(['hyper', 'balanced', 'hd', 'gemini3']).default('balanced'),
  generate_image: z.boolean().default(true),
});
export type GenerateBody = z.output<typeof GenerateBody>;

/** A job's request as its caller sent it: the trace context stored beside it is the renderer's (workers/renderer.ts). */
const requestView = ({ trace: _trace, ...request }: Record<string, unknown>) => request;

export const jobView = (job: RenderJobRow) => ({
  id: job.id,
  status: job.status,
  path: job.path,
  requested_by: job.requested_by,
  request: requestView(job.request),
  attempts: job.attempts,
  error: job.error,
  scene_id: job.scene_id ?? null,
  created_at: new Date(job.created_at).toISOString(),
  updated_at: new Date(job.updated_at).toISOString(),
});

/**
 * What POST /generate and the MCP tool gen_render do: the moment recorded at layer 0 when new and a render
 * job for it, which keeps the trace context of the request that queued it, so the renderer's work on it
 * continues that request's trace (docs/observability.md).
 */
export async function queueGenerate(graph: GraphService, body: GenerateBody, requestedBy: string) {
  const trace: Record<string, string> = {};
  propagation.inject(context.active(), trace);
  const result = await graph.queueRender(
    MomentInput.parse({ path: body.path, event_name: body.event_name, layer: 0, source_type: 'generate', confidence: 0.5 }),
    {
      requestedBy,
      request: { query: body.query ?? body.event_name, preset: body.preset, generate_image: body.generate_image, ...(trace.traceparent ? { trace } : {}) },
    },
  );
  return { job: jobView(result.job), moment: { path: body.path, layer: result.layer, created: result.created } };
}

/**
 * Validates a whole batch before writing any of it: each failure is reported with its record index,
 * and a tdf_hash, when given, must be the hash of the payload exactly as sent.
 */
export function validateTdfBatch(body: unknown): MomentInput[] {
  const records = Array.isArray(body) ? body : [body];
  const errors: ProblemFieldError[] = [];
  if (records.length === 0) errors.push({ path: 'body', message: 'send one record or a non-empty array' });
  if (records.length > MAX_INGEST_BATCH) errors.push({ path: 'body', message: `at most ${MAX_INGEST_BATCH} records per request` });
  const inputs: MomentInput[] = [];
  const seen = new Map<string, number>();
  records.forEach((raw, index) => {
    const result = TdfIngestRecord.safeParse(raw);
    if (!result.success) {
      errors.push(...zodIssues(result.error, `[${index}]`));
      return;
    }
    const record = result.data;
    const rawPayload = (raw as { payload: unknown }).payload;
    if (record.tdf_hash !== undefined && tdfHash(rawPayload) !== record.tdf_hash) {
      errors.push({ path: `[${index}].tdf_hash`, message: 'does not match SHA-256 of the canonical JSON (RFC 8785) of payload' });
    }
    if (record.id !== undefined && record.id !== record.payload.path && `/${record.id}` !== record.payload.path) {
      errors.push({ path: `[${index}].id`, message: 'must equal payload.path' });
    }
    const earlier = seen.get(record.payload.path);
    if (earlier !== undefined) errors.push({ path: `[${index}].payload.path`, message: `duplicates record ${earlier}` });
    seen.set(record.payload.path, index);
    inputs.push(record.payload);
  });
  if (errors.length > 0) {
    const first = errors[0]!;
    throw unprocessable(`nothing was written: ${first.path}: ${first.message}${errors.length > 1 ? ` (and ${errors.length - 1} more)` : ''}`, errors);
  }
  return inputs;
}

export function writeRoutes(deps: GraphRouteDeps): RouteDefinition[] {
  return [
    defineRoute({
      method: 'post',
      path: '/ingest/tdf',
      aliases: graphAliases('/ingest/tdf'),
      operationId: 'ingestTdf',
      summary: 'Ingest TDF records',
      description: `One record or an array of up to ${MAX_INGEST_BATCH}. Each is validated and upserted by path, idempotently, with its curated edges; automatic links are re-derived. A bad record fails the whole batch with 422 naming its index, and nothing is written.`,
      tags: ['writer'],
      security: ['WriterToken'],
      documentedBody: z.union([TdfIngestRecord, z.array(TdfIngestRecord).max(MAX_INGEST_BATCH)]),
      responses: { 200: { description: 'Records written', schema: IngestResultSchema } },
      handler: async (ctx) => {
        const inputs = validateTdfBatch((ctx.request as { body?: unknown }).body);
        try {
          const result = await deps.graph.writeMoments(inputs);
          return { ingested: inputs.length, created: result.created, updated: inputs.length - result.created, paths: result.paths };
        } catch (error) {
          if (error instanceof MissingTargetError) {
            throw unprocessable(`nothing was written: record ${error.index} has an edge to ${error.target}, which is neither stored nor in the batch`, [
              { path: `[${error.index}].payload.edges`, message: error.message },
            ]);
          }
          throw error;
        }
      },
    }),
    defineRoute({
      method: 'post',
      path: '/generate',
      aliases: graphAliases('/generate'),
      operationId: 'generateMoment',
      summary: 'Generate a new moment through the generation service',
      description:
        'Records the moment at layer 0 (when new, auto-linked like any insert) and a durable render job; the renderer worker upgrades it to layer 2 through the generation service.',
      tags: ['writer'],
      security: ['WriterToken'],
      body: GenerateBody,
      responses: {
        202: { description: 'The render job, queued', schema: GenerateResultSchema, links: linksTo({ id: '$response.body#/job/id' }, 'getRenderJob') },
      },
      handler: async (ctx, { body }) => {
        // The kit authorizes the route's security before the handler runs, so a principal is set.
        const accepted = await queueGenerate(deps.graph, body, ctx.state.principal!.id);
        ctx.status = 202;
        ctx.set('Location', `/api/v1/graph/jobs/${accepted.job.id}`);
        return accepted;
      },
    }),
    defineRoute({
      method: 'get',
      path: '/api/v1/graph/jobs/{id}',
      aliases: graphAliases('/api/v1/graph/jobs/{id}'),
      operationId: 'getRenderJob',
      summary: 'A render job',
      description:
        'Readable by the writer who queued it, admins and the service key acting as itself (not a user the gateway forwards with X-User-ID); to anyone else a job does not exist.',
      tags: ['writer'],
      security: ['WriterToken', 'ServiceKey', 'AdminKey'],
      params: z.object({ id: z.uuid() }),
      responses: { 200: { description: 'The job', schema: RenderJobSchema }, 404: { description: 'No such job, or not one the caller may read' } },
      handler: async (ctx, { params }) => {
        const job = await deps.graph.renderJob(params.id);
        if (!job || !mayReadRenderJob(ctx, job)) throw notFound(`no render job ${params.id}`);
        return jobView(job);
      },
    }),
  ];
}
