import type Router from '@koa/router';
import { McpServer, type RegisteredTool } from '@modelcontextprotocol/sdk/server/mcp.js';
import { findUnstorableText, type ProblemFieldError } from '@tempora/kit/http';
import { listToolsIn2020, mountStatelessMcp } from '@tempora/kit/mcp';
import { z } from 'zod';
import { CAUSAL_TYPES, PATH_DEFAULT_TYPES } from './domain/edge-types.ts';
import { momentPath } from './domain/moment.ts';
import { type GraphService, MomentNotFound } from './graph-service.ts';
import { type GraphRateLimits, MCP_PATHS } from './rate-limits.ts';
import { isTrusted } from './routes/context.ts';
import { cappedInt, edgeTypes, entity, place, text, year, yearRange } from './routes/params.ts';
import { depth, direction } from './routes/traversal.ts';
import { GenerateBody, queueGenerate } from './routes/writes.ts';
import { GenerateResultSchema, MomentDetailSchema, MomentSchema, PathSchema, StatsSchema, TraverseSchema } from './schemas.ts';
import { momentDetailView, momentView } from './views.ts';

/**
 * The interface version the spec gives the graph's MCP server, reported as `serverInfo.version` in the
 * answer to `initialize` (where MCP clients read a server's version); the service's own version is /health's.
 */
export const MCP_INTERFACE_VERSION = '1.26.0';

export const MCP_LIMITS = { traverseLimit: { fallback: 50, cap: 200 }, pathHops: { fallback: 6, cap: 10 }, searchLimit: { fallback: 10, cap: 50 } } as const;

const inputs = {
  graph_search: z
    .object({
      query: text.optional().meta({ description: 'keywords (full text over name, description, figures, tags)' }),
      year_from: year.optional(),
      year_to: year.optional(),
      entity: entity.optional(),
      country: place.optional(),
      region: place.optional(),
      city: place.optional(),
      limit: cappedInt(MCP_LIMITS.searchLimit.fallback, MCP_LIMITS.searchLimit.cap),
    })
    .superRefine(yearRange),
  graph_moment: z.object({ path: momentPath }),
  graph_neighbors: z.object({ path: momentPath, direction, edge_types: edgeTypes(CAUSAL_TYPES) }),
  traverse_moments: z.object({
    path: momentPath,
    direction,
    depth,
    edge_types: edgeTypes(CAUSAL_TYPES),
    limit: cappedInt(MCP_LIMITS.traverseLimit.fallback, MCP_LIMITS.traverseLimit.cap),
  }),
  find_path: z.object({
    from_path: momentPath,
    to_path: momentPath,
    max_hops: cappedInt(MCP_LIMITS.pathHops.fallback, MCP_LIMITS.pathHops.cap),
  }),
  gen_render: GenerateBody,
};

/** Every tool the server offers (graph_stats takes no input), for metrics known from the start. */
export const MCP_TOOLS: readonly string[] = ['graph_stats', ...Object.keys(inputs)];

const SUGGESTIONS: Record<string, string> = {
  graph_search:
    'Give keywords in `query`, years as integers (negative for BCE), `entity` as a name or part of one, places as lowercase slugs (united-states), and a limit from 1 to 50.',
  graph_moment:
    'Pass `path` as /year/month/day/HHMM/country/region/city/slug, e.g. /1969/july/20/2017/united-states/florida/cape-canaveral/apollo-11-moon-landing; graph_search finds paths.',
  graph_neighbors: 'Pass a canonical `path`; direction is past, future or both.',
  traverse_moments:
    'Pass a canonical `path`, direction past|future|both, depth 1-4, limit up to 200, and edge_types from causes,caused_by,precedes,follows,influences,contemporaneous,same_location,thematic,same_era,same_conflict,same_figure,challenges.',
  find_path: 'Pass canonical `from_path` and `to_path` (graph_search finds them) and max_hops from 1 to 10.',
  gen_render:
    "Pass a canonical `path` and an `event_name`, with a writer token (Authorization: Bearer) or X-Service-Key on the graph service's own address; through the gateway it is not offered to signed-in users, who render scenes with POST /api/v1/timepoints/generate (paid in credits).",
};

/**
 * Declared input schemas carry the full JSON Schema (types, ranges, defaults), but the SDK is given a
 * lenient validator for each field, so a bad argument reaches the tool, which answers `{error, suggestion}`
 * instead of the transport failing the call.
 */
function lenient(schema: z.ZodObject): z.ZodObject {
  const required: string[] = [];
  const shape = Object.fromEntries(
    Object.entries(schema.shape).map(([key, field]) => {
      const { $schema: _, ...json } = z.toJSONSchema(field as z.ZodType, { io: 'input', unrepresentable: 'any' }) as Record<string, unknown>;
      if (!(field as z.ZodType).safeParse(undefined).success) required.push(key);
      return [key, z.any().optional().meta(json)];
    }),
  );
  return z.object(shape).meta({ required });
}

/** Output schemas admit the error shape too: `{error, suggestion}` is a result, not a failure. */
const orError = (schema: z.ZodObject) => schema.partial().extend({ error: z.string().optional(), suggestion: z.string().optional() });

type ToolResult = { content: Array<{ type: 'text'; text: string }>; structuredContent: Record<string, unknown>; isError?: boolean };
const ok = (value: object): ToolResult => ({ content: [{ type: 'text', text: JSON.stringify(value) }], structuredContent: value as Record<string, unknown> });
const failure = (tool: string, error: string): ToolResult => {
  const value = { error, suggestion: SUGGESTIONS[tool] ?? '' };
  return { content: [{ type: 'text', text: JSON.stringify(value) }], structuredContent: value, isError: true };
};

/**
 * What a tool call may do beyond the free reads: `writer`, the requester's name when the HTTP request came
 * with a writer token or the service key of a service calling for itself (not the gateway's, which calls
 * for a user); `chargeWrite` counts a write against the caller's write window, false when it is spent.
 */
export interface McpCaller {
  writer: string | undefined;
  chargeWrite(): Promise<{ admitted: boolean; retryAfterSeconds: number }>;
}

/** Counts each tool call by tool and outcome (ok, invalid input, failed), for the graph's metrics. */
export type McpCallCounter = (tool: string, outcome: 'ok' | 'invalid' | 'failed') => void;

export function buildMcpServer(graph: GraphService, caller: McpCaller, count: McpCallCounter = () => {}): McpServer {
  const server = new McpServer({ name: 'tempora-graph', version: MCP_INTERFACE_VERSION }, { capabilities: { tools: {} } });
  const registered: Record<string, RegisteredTool> = {};
  const tool = toolRegistrar(server, registered, count);
  registerReadTools(tool, graph, caller);
  registerWriteTools(tool, graph, caller);
  listToolsIn2020(server, registered);
  return server;
}

/** Registers one tool: its `run` is given parsed arguments, and its expected failures answer `{error, suggestion}`. */
type RegisterTool = <S extends z.ZodObject>(
  name: string,
  description: string,
  input: S,
  output: z.ZodObject,
  run: (args: z.output<S>) => Promise<object>,
  readOnly?: boolean,
) => void;

/** Registers tools on `server` (recorded in `registered`), each call counted by outcome. */
function toolRegistrar(server: McpServer, registered: Record<string, RegisteredTool>, count: McpCallCounter): RegisterTool {
  return (name, description, input, output, run, readOnly = true) => {
    registered[name] = server.registerTool(
      name,
      { description, inputSchema: lenient(input), outputSchema: orError(output).shape, annotations: { readOnlyHint: readOnly, openWorldHint: false } },
      async (args: unknown) => {
        const unstorable: ProblemFieldError[] = [];
        findUnstorableText(args, 'arguments', unstorable);
        if (unstorable.length > 0) {
          count(name, 'invalid');
          return failure(name, unstorable.map((issue) => `${issue.path}: ${issue.message}`).join('; '));
        }
        const parsed = input.safeParse(args ?? {});
        if (!parsed.success) {
          count(name, 'invalid');
          return failure(name, parsed.error.issues.map((issue) => `${issue.path.join('.') || 'arguments'}: ${issue.message}`).join('; '));
        }
        try {
          const answer = ok(await run(parsed.data));
          count(name, 'ok');
          return answer;
        } catch (error) {
          count(name, error instanceof MomentNotFound || error instanceof ToolError ? 'invalid' : 'failed');
          if (error instanceof MomentNotFound || error instanceof ToolError) return failure(name, error.message);
          throw error;
        }
      },
    );
  };
}

/** The free reads: statistics, search, one moment, its neighbours, traversal and shortest paths. */
function registerReadTools(tool: RegisterTool, graph: GraphService, caller: McpCaller): void {
  tool('graph_stats', 'Graph statistics: counts of moments and edges by layer, edge type and source, date range.', z.object({}), StatsSchema, () =>
    graph.stats(),
  );

  tool(
    'graph_search',
    'Search moments by keyword, date range, figure and place.',
    inputs.graph_search,
    z.object({ items: z.array(MomentSchema), total: z.number().int() }),
    async (args) => {
      const page = await graph.list({
        q: args.query,
        yearFrom: args.year_from,
        yearTo: args.year_to,
        entity: args.entity,
        country: args.country,
        region: args.region,
        city: args.city,
        sort: args.query ? 'relevance' : 'year',
        limit: args.limit,
        offset: 0,
      });
      return { items: page.items.map(momentView), total: page.total };
    },
  );

  tool('graph_moment', 'One moment by canonical path, with its edges.', inputs.graph_moment, MomentDetailSchema, async (args) => {
    // Pending and rejected moments, like private ones, are shown by path to trusted callers only.
    const row = await graph.moment(args.path, caller.writer !== undefined);
    if (!row) throw new MomentNotFound(args.path);
    return momentDetailView(row, await graph.edgesOf(row.id));
  });

  tool('graph_neighbors', 'Causally connected moments one hop away.', inputs.graph_neighbors, TraverseSchema, (args) =>
    graph.traverse(args.path, { direction: args.direction, depth: 1, types: args.edge_types, limit: MCP_LIMITS.traverseLimit.cap, minWeight: 0 }),
  );

  tool(
    'traverse_moments',
    `Walk the graph N hops from a moment (depth 1-4, limit default ${MCP_LIMITS.traverseLimit.fallback}, capped at ${MCP_LIMITS.traverseLimit.cap}).`,
    inputs.traverse_moments,
    TraverseSchema,
    (args) => graph.traverse(args.path, { direction: args.direction, depth: args.depth, types: args.edge_types, limit: args.limit, minWeight: 0 }),
  );

  tool('find_path', 'Shortest chain of edges between two moments; found is false when none exists within max_hops.', inputs.find_path, PathSchema, (args) =>
    graph.path(args.from_path, args.to_path, { maxHops: args.max_hops, types: [...PATH_DEFAULT_TYPES] }),
  );
}

/** Writes: rendering a new moment, for writer tokens and services calling for themselves. */
function registerWriteTools(tool: RegisterTool, graph: GraphService, caller: McpCaller): void {
  tool(
    'gen_render',
    'Render a new moment: records it at layer 0 and queues a render job (needs a writer token or service key).',
    inputs.gen_render,
    GenerateResultSchema,
    async (args) => {
      if (caller.writer === undefined) throw new ToolError('gen_render requires a writer token or a service key');
      const write = await caller.chargeWrite();
      if (!write.admitted) throw new ToolError(`rate limited: the write window of this credential is spent; retry in ${write.retryAfterSeconds} s`);
      return queueGenerate(graph, args, caller.writer);
    },
    false,
  );
}

/** An expected failure of a tool call, answered as `{error, suggestion}`. */
class ToolError extends Error {}

/** MCP at each of MCP_PATHS (Streamable HTTP, stateless), for requests whose Host and Origin are among `allowedHosts`. */
export function mountMcp(router: Router, graph: GraphService, limits: GraphRateLimits, allowedHosts: readonly string[], count?: McpCallCounter): void {
  mountStatelessMcp(
    router,
    MCP_PATHS,
    (ctx) =>
      buildMcpServer(
        graph,
        {
          writer: isTrusted(ctx) ? ctx.state.principal!.id : undefined,
          chargeWrite: async () => {
            const state = await limits.chargeWrite(ctx);
            return { admitted: !state.limited, retryAfterSeconds: state.resetSeconds };
          },
        },
        count,
      ),
    { allowedHosts },
  );
}
