import type { ToolSpec } from '@tempora/kit/providers';
import { z } from 'zod';
import type { PriceBook, Priced } from './prices.ts';
import type { ConductorSettings } from './settings.ts';

/**
 * Work a paid call started that goes on after the call answered (a simulation run): its end decides whether
 * the call's charge stands, which the gateway decides, as for the same work started through its proxy.
 */
export interface FollowedJob {
  upstream: 'simulation';
  /** The job's resource on its upstream (a path), which answers its status. */
  location: string;
}

/** What a tool call produced: what the model reads, the note in `tools_called`, and the compact output the response carries. */
export interface ToolOutcome {
  result: Record<string, unknown>;
  note: string;
  output: Record<string, unknown>;
  /** The work the call started, when it outlives the call. */
  job?: FollowedJob;
}

/** An expected failure of a tool (the peer refused or could not be reached): the call is refunded and the model told why. */
export class ToolFailure extends Error {
  override name = 'ToolFailure';
}

/** The graph's MCP server, for one request's user. */
export interface GraphSession {
  /** The tool's structured result; throws ToolFailure with the graph's error and suggestion. */
  call(name: string, args: Record<string, unknown>, signal: AbortSignal): Promise<Record<string, unknown>>;
}

/** What a tool's run may use: who it acts for, the request's identity and deadline, and its graph session. */
export interface ToolContext {
  userId: string;
  requestId: string;
  signal: AbortSignal;
  graph: GraphSession;
}

export type Parsed<T> = { ok: true; value: T } | { ok: false; error: string; suggestion: string };

/**
 * One tool the conductor offers its model. Read-only tools are free; a paid tool's price comes from the
 * gateway's published costs for the arguments given, and autonomy decides whether it needs confirmation.
 */
export interface ConductorTool<T = unknown> {
  name: string;
  description: string;
  /** JSON Schema of the arguments, as the model is shown them. */
  parameters: Record<string, unknown>;
  readOnly: boolean;
  /** Checks the arguments and applies the account's defaults (e.g. default render). */
  parse(args: Record<string, unknown>, settings: ConductorSettings): Parsed<T>;
  /** Paid tools only. Throws UnpricedOperation when the gateway publishes no price for it. */
  price?(value: T, prices: PriceBook): Priced;
  /** One line saying what the call would do, for a pause ("render the scene 'Coronation of Napoleon, 1804' with an image"). */
  describe(value: T): string;
  run(value: T, context: ToolContext): Promise<ToolOutcome>;
}

/** The keys of JSON Schema both tool-calling protocols read (the native one takes a subset of OpenAPI's schema). */
const SCHEMA_KEYS = new Set([
  'type',
  'description',
  'enum',
  'properties',
  'required',
  'items',
  'minimum',
  'maximum',
  'minLength',
  'maxLength',
  'minItems',
  'maxItems',
  'pattern',
  'default',
  'format',
  'nullable',
  'anyOf',
]);

/** A JSON Schema reduced to what every protocol reads (no `$schema`, `additionalProperties`, `$ref`). */
export function portableSchema(schema: unknown): Record<string, unknown> {
  if (!schema || typeof schema !== 'object' || Array.isArray(schema)) return {};
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(schema as Record<string, unknown>)) {
    if (!SCHEMA_KEYS.has(key)) continue;
    if (key === 'properties' && value && typeof value === 'object') {
      out.properties = Object.fromEntries(Object.entries(value as Record<string, unknown>).map(([name, field]) => [name, portableSchema(field)]));
    } else if (key === 'items') out.items = portableSchema(value);
    else if (key === 'anyOf' && Array.isArray(value)) out.anyOf = value.map(portableSchema);
    else out[key] = value;
  }
  if (out.properties && !out.type) out.type = 'object';
  return out;
}

/** The tool specs a model is offered. */
export const toolSpecs = (tools: ConductorTool[]): ToolSpec[] =>
  tools.map((tool) => ({ name: tool.name, description: tool.description, parameters: tool.parameters }));

/** Arguments through a zod schema: the model gets every problem and how to fix it. */
export function parseWith<S extends z.ZodType>(schema: S, args: Record<string, unknown>, suggestion: string): Parsed<z.output<S>> {
  const result = schema.safeParse(args);
  if (result.success) return { ok: true, value: result.data };
  return { ok: false, error: result.error.issues.map((issue) => `${issue.path.join('.') || 'arguments'}: ${issue.message}`).join('; '), suggestion };
}

/** A zod object as the JSON Schema a model is shown. */
export const schemaOf = (schema: z.ZodType) => portableSchema(z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any' }));
