import {
  conflict,
  defineRoute,
  IdempotencyKeySchema,
  idempotencyKeyReused,
  LastEventIdSchema,
  linksTo,
  listEnvelope,
  openEventStream,
  Problem,
  pageQuery,
  type RouteDefinition,
  requirePricedAs,
  ServerSentEventSchema,
  simulationOperation,
  toProblem,
  unprocessable,
} from '@tempora/kit/http';
import { TdfRecordSchema } from '@tempora/kit/moments';
import { z } from 'zod';
import { ANY_CALLER, callerOf, requirePaidStart } from '../auth.ts';
import { microsToUsd } from '../domain/budgets.ts';
import { BudgetRefused, TERMINAL } from '../repository/index.ts';
import { RunResultSchema, RunSchema, SimulateRequestSchema } from '../schemas.ts';
import { IdempotencyKeyReused, type Simulations, UnknownTemplate } from '../simulations.ts';
import { runTdf, runView, stepView } from '../views.ts';

const idParams = z.object({ id: z.uuid() });
const RUN_STATUSES = ['queued', 'running', 'completed', 'stopped', 'cancelled', 'failed'] as const;
/** What a run's id opens. */
const runLinks = linksTo({ id: '$response.body#/id' }, 'getSimulation', 'getSimulationResult', 'streamSimulation', 'cancelSimulation');
/** What a creation's answer carries besides the run. */
const createdHeaders = z.object({
  Location: z.string().meta({ description: 'the run' }),
  'Idempotent-Replayed': z
    .literal('true')
    .optional()
    .meta({ description: 'present on the answer to a retry under an Idempotency-Key: the run that key started' }),
});

export interface SimulationRouteDeps {
  simulations: Simulations;
  version: string;
  /** MAX_WAIT_SECONDS: the most `wait` may ask for. */
  maxWaitSeconds: number;
  heartbeatMs: number;
  /** Where paid starts go instead (GATEWAY_URL). */
  gatewayUrl: string;
  /** SERVICE_KEY: the keys a priced operation from the gateway is signed with (requirePricedAs). */
  serviceKeys: readonly string[];
}

export function simulationRoutes(deps: SimulationRouteDeps): RouteDefinition[] {
  return [simulateRoute(deps), listRoute(deps.simulations), getRoute(deps.simulations), resultRoute(deps), eventsRoute(deps), cancelRoute(deps)];
}

/** Starting a run: paid, budgeted, idempotent, optionally waited on. */
function simulateRoute(deps: SimulationRouteDeps): RouteDefinition {
  return defineRoute({
    method: 'post',
    path: '/api/v1/simulate',
    operationId: 'simulate',
    summary: 'Start a simulation run',
    description:
      "Starting a run is paid: the gateway charges it, then calls with its service key and the user's X-User-ID (so does the conductor); a service acting as itself may start runs too. A user's own access token or the simulation API key may read runs but not start one (403 naming the gateway's `/api/v1/simulate`). Answers 202 with the run (queued), its cost estimate and its links at once; `wait=N` holds the answer up to N seconds (at most MAX_WAIT_SECONDS) and answers 200 if the run ended by then. The estimate is reserved against every SimulationBudget that covers the run (global, its account, its template, its mode); a budget without room refuses it with 402 naming the budget and what it has left. With an `Idempotency-Key` (draft-ietf-httpapi-idempotency-key-header), a request arriving while another with its key is being created waits for it and gets its run; a replay is answered as a creation is (202, or 200 with `wait` once the run ended; the run as it stands now; Location).",
    tags: ['simulations'],
    security: ANY_CALLER,
    query: z.object({
      wait: z.coerce
        .number()
        .int()
        .min(0)
        .max(deps.maxWaitSeconds)
        .default(0)
        .meta({ description: `seconds to wait for the run to end, 0 to ${deps.maxWaitSeconds}` }),
    }),
    headers: z.object({ 'idempotency-key': IdempotencyKeySchema.optional().meta({ description: IdempotencyKeySchema.description }) }),
    body: SimulateRequestSchema,
    responses: {
      202: {
        description: 'The run (queued or running when created; as it stands now on a replay, marked `Idempotent-Replayed: true`)',
        schema: RunSchema,
        links: runLinks,
        headers: createdHeaders,
      },
      200: { description: 'With `wait`: the run, ended', schema: RunSchema, links: runLinks, headers: createdHeaders },
      402: { description: "A budget has no room for the run's estimate (`budget`, `period`, `remaining_usd`, `needed_usd`)" },
      403: { description: "A user's access token or the simulation API key: starts are paid, through the gateway" },
      422: { description: 'An invalid field, an unknown template, an invalid Idempotency-Key, or one already used with a different request' },
    },
    handler: async (ctx, { body, query, headers }) => {
      const caller = callerOf(ctx);
      requirePaidStart(caller, deps.gatewayUrl);
      requirePricedAs(ctx, simulationOperation(body.fidelity), deps.serviceKeys);
      let started;
      try {
        started = await deps.simulations.start(body, caller, headers['idempotency-key']);
      } catch (error) {
        throw startRefusal(error);
      }
      const row = query.wait > 0 ? await deps.simulations.waitFor(started.run.id, query.wait * 1000) : started.run;
      // Not `ended` alone: a replay without `wait` of a run that has ended is answered 202, as its creation was.
      ctx.status = query.wait > 0 && TERMINAL.includes(row.status) ? 200 : 202;
      ctx.set('Location', `/api/v1/simulations/${row.id}`);
      if (started.replayed) ctx.set('Idempotent-Replayed', 'true');
      return { ...runView(row), estimate: { usd: row.estimate_micros / 1e6, steps: row.steps_total }, status_url: `/api/v1/simulations/${row.id}` };
    },
  });
}

/** A refused start as its problem: an unknown template or a reused key 422, a budget without room 402; anything else as it is. */
function startRefusal(error: unknown): unknown {
  if (error instanceof UnknownTemplate) return unprocessable(error.message, [{ path: 'body.template', message: error.message }]);
  if (error instanceof IdempotencyKeyReused) return idempotencyKeyReused(error.message);
  if (!(error instanceof BudgetRefused)) return error;
  return new Problem(402, error.message, {
    title: 'Budget exhausted',
    type: 'https://tempora.dev/problems/budget-exhausted',
    extensions: {
      budget: error.budget,
      period: error.period,
      remaining_usd: microsToUsd(error.remainingMicros),
      needed_usd: microsToUsd(error.neededMicros),
    },
  });
}

/** The caller's runs. */
function listRoute(simulations: Simulations): RouteDefinition {
  return defineRoute({
    method: 'get',
    path: '/api/v1/simulations',
    operationId: 'listSimulations',
    summary: "The caller's runs, newest first",
    tags: ['simulations'],
    security: ANY_CALLER,
    query: pageQuery(20, 100).extend({ status: z.enum(RUN_STATUSES).optional() }),
    responses: { 200: { description: 'The list envelope', schema: listEnvelope(RunSchema) } },
    handler: async (ctx, { query }) => {
      const page = await simulations.list(callerOf(ctx).owner, query);
      return { items: page.items.map(runView), total: page.total, limit: query.limit, offset: query.offset };
    },
  });
}

/** One run with its steps. */
function getRoute(simulations: Simulations): RouteDefinition {
  return defineRoute({
    method: 'get',
    path: '/api/v1/simulations/{id}',
    operationId: 'getSimulation',
    summary: 'A run: status, progress (each step as it completed), cost so far',
    tags: ['simulations'],
    security: ANY_CALLER,
    params: idParams,
    responses: { 200: { description: 'The run with its steps', schema: RunSchema }, 404: { description: "No such run (or not the caller's)" } },
    handler: async (ctx, { params }) => {
      const row = await simulations.visible(params.id, callerOf(ctx));
      return { ...runView(row), steps: (await simulations.steps(row.id)).map(stepView) };
    },
  });
}

/** An ended run's result, as JSON or TDF. */
function resultRoute(deps: SimulationRouteDeps): RouteDefinition {
  return defineRoute({
    method: 'get',
    path: '/api/v1/simulations/{id}/result',
    operationId: 'getSimulationResult',
    summary: 'The result of an ended run, or its TDF record (`format=tdf`)',
    description:
      "Entity states per timepoint, the relationship graph over time, dialog, causal provenance, knowledge and exposures, confidence per item and per run, cost and tokens, and the mode's own section (`timeline`, `portal`, `branching`, `cycles`, `acts`). A run that stopped at its maximum or was cancelled has its partial result, marked in `partial`. 409 while the run has not ended.",
    tags: ['simulations'],
    security: ANY_CALLER,
    params: idParams,
    query: z.object({
      format: z
        .enum(['json', 'tdf'])
        .default('json')
        .meta({ description: '`tdf`: the TDF envelope (RFC 8785 canonical JSON, SHA-256), as the graph service exports' }),
    }),
    responses: {
      200: { description: 'The result, or its TDF record', schema: z.union([RunResultSchema, TdfRecordSchema]) },
      404: { description: 'No such run' },
      409: { description: 'The run has not ended, or ended with no result' },
    },
    handler: async (ctx, { params, query }) => {
      const row = await deps.simulations.visible(params.id, callerOf(ctx));
      if (!TERMINAL.includes(row.status))
        throw conflict(`simulation ${row.id} is ${row.status} (${row.steps_done} of ${row.steps_total} steps); its result exists once it ends`);
      if (!row.result) throw conflict(`simulation ${row.id} ${row.status} before it produced anything${row.error ? `: ${row.error.detail}` : ''}`);
      if (query.format === 'tdf') return runTdf(row, deps.version);
      return { run: runView(row), result: row.result };
    },
  });
}

/** A run's progress as it happens. */
function eventsRoute(deps: SimulationRouteDeps): RouteDefinition {
  return defineRoute({
    method: 'get',
    path: '/api/v1/simulations/{id}/events',
    operationId: 'streamSimulation',
    summary: 'Progress as Server-Sent Events',
    description:
      'Events: `run` (the run as it stands), one `step` per completed step (seq, kind, label, detail, cost), in order, including those completed before the stream opened, then `end` (the run as it ended) and the stream closes; `error` (a problem) in place of `end` when the stream cannot go on (the run itself goes on: reconnect). Each event keeps its id on every connection (`run` is 1, the step of seq n is n + 2, `end` follows the last step): a reconnect with `Last-Event-ID` gets only the events after that id. Comment heartbeats keep the connection open. Closing the stream does not cancel the run.',
    tags: ['simulations'],
    security: ANY_CALLER,
    params: idParams,
    headers: z.object({ 'last-event-id': LastEventIdSchema.optional() }),
    responses: {
      200: { description: 'text/event-stream', contentType: 'text/event-stream', schema: ServerSentEventSchema },
      404: { description: 'No such run' },
      422: { description: "A parameter is invalid, or Last-Event-ID is not an id this run's stream has given" },
    },
    handler: async (ctx, { params, headers }) => {
      const first = await deps.simulations.visible(params.id, callerOf(ctx));
      const after = headers['last-event-id'] ?? 0;
      deps.simulations.checkResume(first, after);
      const stream = openEventStream(ctx, { heartbeatMs: deps.heartbeatMs, lastEventId: after });
      try {
        for await (const { event, data } of deps.simulations.follow(first, stream.signal, after)) stream.send(event, data);
      } catch (error) {
        // The answer has begun: a client learns of a failure (a database outage, say) from an `error`
        // event in place of `end`, and reconnects, instead of reading a stream that stops saying nothing.
        stream.send('error', (toProblem(error) ?? new Problem(500, 'the progress stream failed')).toJSON(ctx.path));
      } finally {
        stream.end();
      }
    },
  });
}

/** Cancelling a run. */
function cancelRoute(deps: SimulationRouteDeps): RouteDefinition {
  return defineRoute({
    method: 'post',
    path: '/api/v1/simulations/{id}/cancel',
    operationId: 'cancelSimulation',
    summary: 'Cancel a run',
    description:
      'The model call in flight is aborted; the run ends `cancelled` with the steps it completed as its partial result, and its budgets are settled at what it spent. 409 when it has already ended.',
    tags: ['simulations'],
    security: ANY_CALLER,
    params: idParams,
    query: z.object({
      wait: z.coerce.number().int().min(0).max(deps.maxWaitSeconds).default(5).meta({ description: 'seconds to wait for the run to end (default 5)' }),
    }),
    responses: {
      202: { description: 'Cancellation requested; the run is ending', schema: RunSchema },
      200: { description: 'The run, cancelled', schema: RunSchema },
      404: { description: 'No such run' },
      409: { description: 'The run has already ended' },
    },
    handler: async (ctx, { params, query }) => {
      const row = await deps.simulations.visible(params.id, callerOf(ctx));
      if (TERMINAL.includes(row.status) || !(await deps.simulations.cancel(row.id)))
        throw conflict(`simulation ${row.id} has already ended (${(await deps.simulations.current(row.id)).status})`);
      const now = await deps.simulations.waitFor(row.id, query.wait * 1000);
      ctx.status = TERMINAL.includes(now.status) ? 200 : 202;
      return runView(now);
    },
  });
}
