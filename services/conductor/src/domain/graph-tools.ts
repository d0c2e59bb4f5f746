import { z } from 'zod';
import { type ConductorTool, portableSchema, type ToolOutcome } from './tools.ts';

/** The graph's read tools the conductor offers (its `gen_render` writes; scenes are rendered through the generation service). */
export const GRAPH_TOOLS = ['graph_search', 'graph_moment', 'graph_neighbors', 'traverse_moments', 'find_path'] as const;

export interface ListedGraphTool {
  name: string;
  description: string;
  inputSchema: Record<string, unknown>;
  readOnly: boolean;
}

type Row = Record<string, unknown>;
/** A list of the graph's answer (items, nodes, edges), its entries picked from below; absent or of another shape: none. */
const Rows = z.array(z.record(z.string(), z.unknown())).catch([]);
const rows = (value: unknown): Row[] => Rows.parse(value);
const pick = (row: Row, keys: string[]) => Object.fromEntries(keys.filter((key) => row[key] !== undefined).map((key) => [key, row[key]]));
const names = (nodes: Row[], max: number) => nodes.slice(0, max).map((node) => `${String(node.name)} (${String(node.year)})`);

/** The graph's answers reduced to what a model needs to go on and a reader to follow, per tool. */
function summarize(name: string, result: Row): ToolOutcome {
  switch (name) {
    case 'graph_search': {
      const items = rows(result.items)
        .slice(0, 10)
        .map((item) => pick(item, ['path', 'event_name', 'year', 'figures', 'description']));
      const note = items.length
        ? `found ${items.length}: ${items
            .slice(0, 3)
            .map((item) => `${String(item.event_name)} (${String(item.year)})`)
            .join('; ')}`
        : 'found no moment';
      return {
        result: { items, total: result.total },
        note,
        output: { items: items.map((item) => pick(item, ['path', 'event_name', 'year'])), total: result.total },
      };
    }
    case 'graph_moment': {
      const edges = rows(result.edges)
        .slice(0, 20)
        .map((edge) => pick(edge, ['source', 'target', 'type', 'description']));
      const moment = pick(result, ['path', 'event_name', 'year', 'description', 'figures', 'city', 'country', 'layer']);
      return {
        result: { ...moment, edges, edge_count: result.edge_count },
        note: `${String(result.event_name)} (${String(result.year)}), ${String(result.edge_count)} edges`,
        output: { ...pick(result, ['path', 'event_name', 'year']), edge_count: result.edge_count },
      };
    }
    case 'find_path': {
      const nodes = rows(result.nodes).map((node) => pick(node, ['id', 'name', 'year', 'hop']));
      const edges = rows(result.edges).map((edge) => pick(edge, ['source', 'target', 'type', 'description']));
      const note = result.found ? `${String(result.hops)} hops: ${names(nodes, 8).join(' → ')}` : 'no path within the hop limit';
      return {
        result: { found: result.found, hops: result.hops, nodes, edges },
        note,
        output: { found: result.found, hops: result.hops, nodes: nodes.map((node) => pick(node, ['id', 'name', 'year'])) },
      };
    }
    default: {
      // graph_neighbors and traverse_moments share the traversal shape.
      const nodes = rows(result.nodes).map((node) => pick(node, ['id', 'name', 'year', 'hop']));
      const edges = rows(result.edges)
        .slice(0, 60)
        .map((edge) => pick(edge, ['source', 'target', 'type']));
      const others = nodes.filter((node) => node.hop !== 0);
      const note = `${others.length} moments${others.length ? `: ${names(others, 5).join('; ')}` : ''}${result.truncated ? ' (truncated)' : ''}`;
      return {
        result: { anchor: result.anchor, direction: result.direction, nodes: nodes.slice(0, 60), edges, truncated: result.truncated },
        note,
        output: { anchor: result.anchor, node_count: nodes.length, nodes: nodes.slice(0, 12) },
      };
    }
  }
}

/**
 * The graph's read tools as the graph's MCP server lists them (its descriptions and argument schemas), so
 * they cannot drift from the server; the graph validates the arguments and answers `{error, suggestion}`.
 */
export function graphTools(listed: ListedGraphTool[]): ConductorTool<Record<string, unknown>>[] {
  return listed
    .filter((tool) => (GRAPH_TOOLS as readonly string[]).includes(tool.name) && tool.readOnly)
    .map((tool) => ({
      name: tool.name,
      description: `${tool.description} (graph, free)`,
      parameters: portableSchema(tool.inputSchema),
      readOnly: true,
      parse: (args) => ({ ok: true, value: args }),
      describe: (args) => `${tool.name} ${JSON.stringify(args)}`,
      run: async (args, context) => summarize(tool.name, await context.graph.call(tool.name, args, context.signal)),
    }));
}
