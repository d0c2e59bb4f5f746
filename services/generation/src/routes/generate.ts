import {
  DEFAULT_GENERATION_PRESET,
  defineRoute,
  generationOperation,
  IdempotencyKeySchema,
  LastEventIdSchema,
  linksTo,
  openEventStream,
  type RouteDefinition,
  requirePricedAs,
  ServerSentEventSchema,
} from '@tempora/kit/http';
import type { ProviderKind } from '@tempora/kit/providers';
import type { Context } from 'koa';
import { z } from 'zod';
import type { AgentEvent } from '../pipeline/events.ts';
import { problemOf } from '../problems.ts';
import { type GenerateRequest, GenerateRequestSchema, PRESETS, SceneSchema } from '../schemas.ts';
import { jobView } from '../views.ts';
import { isService, type RouteDeps, userOf } from './context.ts';

const JobSchema = z
  .object({
    job_id: z.string(),
    status: z.enum(['queued', 'running', 'completed', 'failed']),
    timepoint_id: z.string().nullable(),
    timepoint_url: z.string().nullable(),
    error: z.object({ status: z.number(), detail: z.string() }).passthrough().nullable(),
    callback: z.object({ url: z.string(), status: z.string(), attempts: z.number() }).passthrough().nullable(),
    created_at: z.string(),
    updated_at: z.string(),
    finished_at: z.string().nullable(),
  })
  .meta({ id: 'GenerationJob' });

const PROVIDER_KINDS = ['native', 'aggregator', 'image_vendor', 'free_image', 'offline'] as const satisfies readonly ProviderKind[];

const ModelsSchema = z
  .object({
    providers: z
      .object(Object.fromEntries(PROVIDER_KINDS.map((kind) => [kind, z.boolean()])) as Record<ProviderKind, z.ZodBoolean>)
      .meta({ description: 'each provider kind, true when this server has it configured' }),
    presets: z.array(
      z.object({
        name: z.enum(PRESETS),
        native: z.string(),
        aggregator: z.string(),
        max_tokens: z.number().int(),
        native_image: z.string(),
        vendor_image: z.string(),
        aggregator_image: z.string(),
        override: z
          .object({ provider: z.enum(PROVIDER_KINDS), model: z.string(), temperature: z.number().optional(), max_tokens: z.number().int().optional() })
          .optional()
          .meta({ description: "the operator's replacement of the preset's text model (MODEL_PRESETS)" }),
        default: z.boolean(),
        allowed: z.boolean(),
      }),
    ),
    permissive: z.object({ text_model: z.string(), image_model: z.string() }),
    image_models: z.array(z.string()),
  })
  .meta({ id: 'Models' });

/**
 * A generation stream is its render: closing the connection cancels the agents and stores nothing (and the
 * gateway refunds it), so there is nothing to resume. A reconnect after an event would get a new render whose
 * events the client would take for the rest of the first, so it is refused; 0 (no event read) is a fresh start.
 */
const NotResumedSchema = LastEventIdSchema.refine((id) => id === 0, {
  message: 'a generation stream cannot be resumed (closing it cancelled its render): start a new one without Last-Event-ID',
}).meta({ description: 'only 0 (no event read): a generation stream cannot be resumed' });

const DRAINING = 'This replica is shutting down (Retry-After): another replica takes the request';

export function generateRoutes(deps: RouteDeps): RouteDefinition[] {
  return [generateSyncRoute(deps), generateStreamRoute(deps), generateAsyncRoute(deps), listModelsRoute(deps), getJobRoute(deps)];
}

/** The owner and the models a generation request gets, checked before the gateway's price is, as each route does first. */
function admitted(ctx: Context, deps: RouteDeps, body: GenerateRequest) {
  const owner = userOf(ctx);
  const selection = deps.generations.admit(body, owner);
  requirePricedAs(ctx, generationOperation(body.preset ?? DEFAULT_GENERATION_PRESET, body.generate_image), deps.serviceKeys);
  return { owner, selection };
}

function generateSyncRoute(deps: RouteDeps): RouteDefinition {
  return defineRoute({
    method: 'post',
    path: '/api/v1/timepoints/generate/sync',
    operationId: 'generateSync',
    security: [],
    summary: 'Generate a scene and wait for it',
    description: 'Runs the 14-agent pipeline and returns the stored scene. The owner is X-User-ID (set by the gateway).',
    tags: ['generation'],
    body: GenerateRequestSchema,
    responses: {
      200: {
        description: 'The scene record',
        schema: SceneSchema,
        links: linksTo({ id: '$response.body#/id' }, 'getTimepoint', 'getTimepointImage', 'setTimepointVisibility', 'deleteTimepoint'),
      },
      422: { description: 'Invalid field, unavailable model, or the Judge rejected the query' },
      502: { description: 'A required agent failed' },
      503: { description: DRAINING },
      504: { description: 'The pipeline did not finish in time' },
    },
    handler: async (ctx, { body }) => {
      const { owner, selection } = admitted(ctx, deps, body);
      const controller = new AbortController();
      // The response closing before it was written means the client went away: cancel the remaining agents.
      ctx.res.on('close', () => {
        if (!ctx.res.writableFinished) controller.abort();
      });
      try {
        return await deps.generations.generate(body, selection, owner, 'sync', { signal: controller.signal });
      } catch (error) {
        throw problemOf(error);
      }
    },
  });
}

function generateStreamRoute(deps: RouteDeps): RouteDefinition {
  return defineRoute({
    method: 'post',
    path: '/api/v1/timepoints/generate/stream',
    operationId: 'generateStream',
    security: [],
    summary: 'Generate a scene, reporting each agent as it completes (Server-Sent Events)',
    description:
      'Events: `start` (models chosen), one `agent` event per reported agent in the order Judge, Timeline, Grounding, Scene, Characters, Moment, Camera, Dialog, Critique, ImagePrompt, Optimizer, ImageGen (status completed, skipped or failed, with timing, model and tokens), then `done` carrying the scene id and the scene, or `error` carrying a problem. Events are numbered from 1 (`id`). Comment heartbeats keep the connection open. Closing the connection cancels the remaining agents, so a stream cannot be resumed: a `Last-Event-ID` other than 0 is refused (422) rather than answered with another render under ids the client already holds.',
    tags: ['generation'],
    headers: z.object({ 'last-event-id': NotResumedSchema.optional() }),
    body: GenerateRequestSchema,
    responses: {
      200: { description: 'text/event-stream', contentType: 'text/event-stream', schema: ServerSentEventSchema },
      422: { description: 'Invalid field or unavailable model, or a Last-Event-ID after an event (before the stream starts)' },
      503: { description: DRAINING },
    },
    handler: async (ctx, { body }) => {
      const { owner, selection } = admitted(ctx, deps, body);
      const stream = openEventStream(ctx, { heartbeatMs: deps.heartbeatMs });
      stream.send('start', {
        request_id: ctx.state.requestId,
        query: body.query,
        preset: selection.preset,
        model_policy: selection.policy,
        text_model: selection.text,
        image_chain: body.generate_image ? selection.images : [],
        warnings: selection.warnings,
      });
      try {
        const scene = await deps.generations.generate(body, selection, owner, 'stream', {
          signal: stream.signal,
          onEvent: (event: AgentEvent) => stream.send('agent', event),
        });
        stream.send('done', { id: scene.id, timepoint_id: scene.id, url: `/api/v1/timepoints/${scene.id}`, scene });
      } catch (error) {
        stream.send('error', problemOf(error).toJSON(ctx.path));
      } finally {
        stream.end();
      }
    },
  });
}

function generateAsyncRoute(deps: RouteDeps): RouteDefinition {
  return defineRoute({
    method: 'post',
    path: '/api/v1/timepoints/generate',
    operationId: 'generateAsync',
    security: [],
    summary: 'Start an asynchronous generation',
    description:
      'Answers 202 with a job at once. With `callback_url`, the result is POSTed there when the job ends: body `{job_id, status, timepoint_id, timepoint | error, request_context}`, headers `X-Tempora-Timestamp` (Unix seconds) and `X-Tempora-Signature: sha256=<hex HMAC-SHA256 of "<timestamp>.<body>" keyed with CALLBACK_SECRET>`, retried with exponential back-off on network errors, 408, 429 and 5xx. Loopback and private callback hosts are refused unless allow-listed. With an `Idempotency-Key` (draft-ietf-httpapi-idempotency-key-header, per X-User-ID), a retry is given the job its key submitted, as it stands now, instead of a second job; a request arriving while another with its key is being submitted waits for it.',
    tags: ['generation'],
    headers: z.object({ 'idempotency-key': IdempotencyKeySchema.optional().meta({ description: IdempotencyKeySchema.description }) }),
    body: GenerateRequestSchema,
    responses: {
      202: {
        description: 'The job (queued when submitted; as it stands now on a replay, marked `Idempotent-Replayed: true`)',
        schema: JobSchema,
        links: linksTo({ job_id: '$response.body#/job_id' }, 'getJob'),
        headers: z.object({
          Location: z.string().meta({ description: 'the job' }),
          'Idempotent-Replayed': z
            .literal('true')
            .optional()
            .meta({ description: 'present on the answer to a retry under an Idempotency-Key: the job that key submitted' }),
        }),
      },
      422: {
        description: 'Invalid field, unavailable model, refused callback_url, an invalid Idempotency-Key, or one already used with a different request',
      },
      503: { description: DRAINING },
    },
    handler: async (ctx, { body, headers }) => {
      const { owner } = admitted(ctx, deps, body);
      const { job, replayed } = await deps.generations.submit(body, owner, headers['idempotency-key']);
      ctx.status = 202;
      ctx.set('Location', `/api/v1/timepoints/jobs/${job.id}`);
      if (replayed) ctx.set('Idempotent-Replayed', 'true');
      return jobView(job);
    },
  });
}

function listModelsRoute({ generations }: RouteDeps): RouteDefinition {
  return defineRoute({
    method: 'get',
    path: '/api/v1/models',
    operationId: 'listModels',
    security: [],
    summary: 'Presets, providers and image models this server offers',
    tags: ['generation'],
    responses: { 200: { description: 'What text_model, image_model, preset and model_policy may name here', schema: ModelsSchema } },
    handler: () => generations.models(),
  });
}

function getJobRoute({ generations }: RouteDeps): RouteDefinition {
  return defineRoute({
    method: 'get',
    path: '/api/v1/timepoints/jobs/{job_id}',
    operationId: 'getJob',
    security: [],
    summary: 'Status of an asynchronous generation',
    description: 'States: queued → running → completed | failed. A job with an owner is visible to that X-User-ID (and service-key callers) only.',
    tags: ['generation'],
    params: z.object({ job_id: z.uuid() }),
    responses: { 200: { description: 'The job', schema: JobSchema }, 404: { description: 'No such job' } },
    handler: async (ctx, { params }) => jobView(await generations.job(params.job_id, { user: userOf(ctx), service: isService(ctx) })),
  });
}
