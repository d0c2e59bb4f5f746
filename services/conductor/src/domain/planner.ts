import type { ChatMessage, ChatTurn, ToolCall } from '@tempora/kit/providers';
import { z } from 'zod';
import { type Intent, parseRequest, type Subject } from './request-intents.ts';
import type { Verbosity } from './settings.ts';

/**
 * The offline planner: the conductor's model when no language model is configured. It maps a request to
 * tools from its words (clauses joined by "then", "and", commas; verbs such as render, simulate, "from X to
 * Y") and resolves the moments it names through the graph's search, in fixed phases, one model turn each:
 * searches, then actions (paths, traversals, renders, simulations, balance), then one look at each
 * simulation started, then the answer. Each phase's calls go out in one turn, so they run in parallel.
 * It is deterministic and reads its progress from the conversation alone, so a paused request resumes
 * where it stopped.
 */

/** What earlier requests of the conversation left to refer back to. */
export interface PlannerMemory {
  moment?: { path: string; event_name: string; year: number };
  simulation?: string;
}

export const OFFLINE_LABEL = 'Offline planner (no language model is configured: the request was mapped to tools by its words)';

type Found = { path: string; event_name: string; year: number };

/** A moment or a node as the graph's tools answer it: named by `event_name` or `name`. */
const Named = z.object({ name: z.string().optional(), event_name: z.string().optional(), year: z.number().optional() });
type Named = z.output<typeof Named>;
/**
 * What the planner reads of a tool's answer: the graph's (searches, paths, traversals, moments), the
 * conductor's own tools' (scenes, simulations, balance) and refusals (`error`, `declined`). Every field is
 * optional, for each tool answers some; one of another type makes the answer unreadable, never guessed at.
 */
const ToolAnswer = Named.extend({
  error: z.string().optional(),
  declined: z.boolean().optional(),
  items: z.array(z.object({ path: z.string(), event_name: z.string(), year: z.number() })).optional(),
  found: z.boolean().optional(),
  hops: z.number().optional(),
  nodes: z.array(Named.extend({ hop: z.number().optional() })).optional(),
  edges: z.array(z.object({ source: z.string(), type: z.string(), target: z.string(), description: z.string().optional() })).optional(),
  path: z.string().optional(),
  description: z.string().optional(),
  edge_count: z.number().optional(),
  id: z.string().optional(),
  status: z.string().optional(),
  mode: z.string().nullable().optional(),
  status_url: z.string().optional(),
  progress: z.number().nullable().optional(),
  title: z.string().optional(),
  url: z.string().optional(),
  image_url: z.string().nullable().optional(),
  summary: z.string().optional(),
  characters: z.array(z.string()).optional(),
  dialog: z.array(z.string()).optional(),
  balance: z.number().optional(),
  confidence: z.number().optional(),
  entities_count: z.number().optional(),
  timepoints_count: z.number().optional(),
});
type ToolAnswer = z.output<typeof ToolAnswer>;
type Results = Map<string, ToolAnswer>;

const subjectsOf = (intent: Intent): Subject[] => {
  switch (intent.kind) {
    case 'path':
      return [intent.from, intent.to];
    case 'traverse':
    case 'moment':
    case 'render':
      return [intent.subject];
    default:
      return [];
  }
};
const keyOf = (subject: Subject) => `${subject.query.toLowerCase()}|${subject.year ?? ''}`;
const call = (id: string, name: string, args: Record<string, unknown>): ToolCall => ({ id, name, arguments: args });

/** The ids of the searches: one per distinct subject that names something (back-references use memory). */
function searches(intents: Intent[]): Map<string, { id: string; subject: Subject }> {
  const found = new Map<string, { id: string; subject: Subject }>();
  for (const subject of intents.flatMap(subjectsOf)) {
    if (!subject.query && subject.year === undefined) continue;
    const key = keyOf(subject);
    if (!found.has(key)) found.set(key, { id: `plan-search-${found.size}`, subject });
  }
  return found;
}

function resolve(subject: Subject, searched: ReturnType<typeof searches>, results: Results, memory: PlannerMemory): Found | undefined {
  if (!subject.query && subject.year === undefined) return memory.moment;
  const search = searched.get(keyOf(subject));
  const item = search ? results.get(search.id)?.items?.[0] : undefined;
  return item ? { path: item.path, event_name: item.event_name, year: item.year } : undefined;
}

/** A turn's worth of actions for the intents, once the searches are in. */
function actions(intents: Intent[], searched: ReturnType<typeof searches>, results: Results, memory: PlannerMemory): ToolCall[] {
  const calls: ToolCall[] = [];
  intents.forEach((intent, index) => {
    const id = `plan-act-${index}`;
    switch (intent.kind) {
      case 'path': {
        const from = resolve(intent.from, searched, results, memory);
        const to = resolve(intent.to, searched, results, memory);
        if (from && to) calls.push(call(id, 'find_path', { from_path: from.path, to_path: to.path }));
        break;
      }
      case 'traverse': {
        const anchor = resolve(intent.subject, searched, results, memory);
        if (anchor) calls.push(call(id, 'traverse_moments', { path: anchor.path, direction: intent.direction, depth: 2, limit: 30 }));
        break;
      }
      case 'moment': {
        const moment = resolve(intent.subject, searched, results, memory);
        if (moment) calls.push(call(id, 'graph_moment', { path: moment.path }));
        break;
      }
      case 'render': {
        const moment = resolve(intent.subject, searched, results, memory);
        const query = moment ? `${moment.event_name}, ${moment.year < 0 ? `${-moment.year} BCE` : moment.year}` : intent.subject.text;
        if (query.trim().length >= 3) calls.push(call(id, 'render_scene', { query, ...(intent.image === undefined ? {} : { generate_image: intent.image }) }));
        break;
      }
      case 'simulate':
        calls.push(call(id, 'start_simulation', { prompt: intent.prompt, mode: intent.mode, ...(intent.fidelity ? { fidelity: intent.fidelity } : {}) }));
        break;
      case 'balance':
        calls.push(call(id, 'get_balance', {}));
        break;
      case 'follow':
      case 'summarize':
        if (memory.simulation)
          calls.push(call(id, intent.kind === 'follow' ? 'follow_simulation' : 'summarize_simulation', { simulation_id: memory.simulation }));
        break;
    }
  });
  return calls;
}

/** The tool calls made since the request and what each answered (parsed JSON), by call id. */
function progress(messages: ChatMessage[]): { called: Set<string>; results: Results } {
  const last = messages.map((message) => message.role).lastIndexOf('user');
  const called = new Set<string>();
  const results: Results = new Map();
  for (const message of messages.slice(last + 1)) {
    if (message.role === 'assistant') for (const toolCall of message.tool_calls ?? []) called.add(toolCall.id);
    if (message.role === 'tool') {
      let content: unknown;
      try {
        content = JSON.parse(message.content);
      } catch {
        results.set(message.tool_call_id, { error: message.content });
        continue;
      }
      const answer = ToolAnswer.safeParse(content);
      results.set(message.tool_call_id, answer.success ? answer.data : { error: 'its answer could not be read' });
    }
  }
  return { called, results };
}

const yearText = (year: unknown) => (typeof year === 'number' && year < 0 ? `${-year} BCE` : String(year));
const named = (node: Named) => `${String(node.name ?? node.event_name)} (${yearText(node.year)})`;
const failure = (result: ToolAnswer | undefined) => (result?.declined ? 'you declined it' : result?.error ? String(result.error) : undefined);

/**
 * The answer, intent by intent, from what the tools answered, as long as the verbosity asks. Over 80 lines:
 * one short case per intent, kept in one switch so that the offline reply's wording reads in one place.
 */
function answer(intents: Intent[], searched: ReturnType<typeof searches>, results: Results, memory: PlannerMemory, verbosity: Verbosity): string {
  const detailed = verbosity === 'detailed';
  const brief = verbosity === 'brief';
  const lines: string[] = [];
  const unresolved = (subject: Subject) => `I found no moment in the graph for "${subject.text}".`;
  intents.forEach((intent, index) => {
    const result = results.get(`plan-act-${index}`);
    const failed = failure(result);
    switch (intent.kind) {
      case 'path': {
        const missing = [intent.from, intent.to].find((subject) => !resolve(subject, searched, results, memory));
        if (missing) return void lines.push(unresolved(missing));
        if (failed) return void lines.push(`The path could not be traced: ${failed}.`);
        if (!result?.found) return void lines.push(`No chain within the hop limit joins ${intent.from.text} and ${intent.to.text}.`);
        const nodes = result.nodes ?? [];
        if (brief) return void lines.push(`${named(nodes[0] ?? {})} → ${named(nodes[nodes.length - 1] ?? {})}: ${String(result.hops)} hops.`);
        lines.push(`From ${named(nodes[0] ?? {})} to ${named(nodes[nodes.length - 1] ?? {})}, ${String(result.hops)} hops: ${nodes.map(named).join(' → ')}.`);
        if (detailed)
          for (const edge of result.edges ?? [])
            lines.push(`  - ${String(edge.source)} ${String(edge.type)} ${String(edge.target)}${edge.description ? `: ${String(edge.description)}` : ''}`);
        return;
      }
      case 'traverse':
      case 'moment': {
        if (!resolve(intent.subject, searched, results, memory)) return void lines.push(unresolved(intent.subject));
        if (failed) return void lines.push(`The graph could not answer: ${failed}.`);
        if (intent.kind === 'moment') {
          return void lines.push(
            brief
              ? `${named(result ?? {})}.`
              : `${named(result ?? {})}: ${String(result?.description ?? '')}${detailed ? ` (${String(result?.path)}, ${String(result?.edge_count)} edges)` : ''}`.trim(),
          );
        }
        const nodes = (result?.nodes ?? []).filter((node) => node.hop !== 0);
        const word = intent.direction === 'past' ? 'led to' : 'followed from';
        const subject = resolve(intent.subject, searched, results, memory)!;
        if (brief) return void lines.push(`${nodes.length} moments ${word} ${subject.event_name}.`);
        lines.push(
          `${nodes.length} moments ${word} ${subject.event_name}${nodes.length ? `: ${(detailed ? nodes : nodes.slice(0, 6)).map(named).join('; ')}` : ''}.`,
        );
        return;
      }
      case 'render': {
        if (failed) return void lines.push(`The scene could not be rendered: ${failed}.`);
        if (!result) return void lines.push(`There was nothing to render for "${intent.subject.text}".`);
        if (brief) return void lines.push(`Rendered "${String(result.title)}" (${String(result.url)}).`);
        lines.push(
          `Rendered "${String(result.title)}": ${String(result.url)}${result.image_url ? `, image ${String(result.image_url)}` : ''}.${result.summary ? ` ${String(result.summary)}` : ''}`,
        );
        if (detailed) {
          if (Array.isArray(result.characters) && result.characters.length) lines.push(`  Characters: ${result.characters.join(', ')}.`);
          for (const line of result.dialog ?? []) lines.push(`  ${line}`);
        }
        return;
      }
      case 'simulate': {
        if (failed) return void lines.push(`The simulation could not be started: ${failed}.`);
        const followed = results.get(`plan-follow-${index}`);
        const status = followed && !followed.error ? followed.status : result?.status;
        if (brief) return void lines.push(`Simulation ${String(result?.id)} started (${String(status)}).`);
        lines.push(
          `Started a ${String(result?.mode ?? intent.mode)} simulation (${String(result?.id)}) of "${intent.prompt}": ${String(status)}; follow it at ${String(result?.status_url)}.`,
        );
        return;
      }
      case 'balance':
        return void lines.push(failed ? `The balance could not be read: ${failed}.` : `Your balance is ${String(result?.balance)} credits.`);
      case 'follow':
      case 'summarize':
        if (!memory.simulation) return void lines.push('This conversation has started no simulation yet.');
        if (failed) return void lines.push(`Simulation ${memory.simulation}: ${failed}.`);
        if (intent.kind === 'follow')
          return void lines.push(
            `Simulation ${String(result?.id)} is ${String(result?.status)}${typeof result?.progress === 'number' ? `, ${String(result.progress)}% of its steps done` : ''}.`,
          );
        return void lines.push(
          `Simulation ${memory.simulation} ${String(result?.status)}${result?.title ? `: "${String(result.title)}"` : ''}${result?.entities_count !== undefined ? `, ${String(result.entities_count)} entities over ${String(result.timepoints_count)} timepoints` : ''}${typeof result?.confidence === 'number' ? `, confidence ${String(result.confidence)}` : ''}.${detailed && result?.summary ? ` ${String(result.summary)}` : ''}`,
        );
    }
  });
  if (lines.length === 0)
    lines.push('I could not tell what to do from this request: name a moment, ask for a path "from X to Y", or ask me to render or simulate something.');
  return `${brief ? '[offline] ' : `${OFFLINE_LABEL}.\n`}${lines.join('\n')}`;
}

/**
 * The planner for one request: given the conversation so far (its tool results included), the next turn.
 * `memory` resolves back-references ("render it") to the conversation's earlier requests.
 */
export function offlinePlanner(request: string, memory: PlannerMemory, verbosity: Verbosity): (messages: ChatMessage[]) => ChatTurn {
  const intents = parseRequest(request);
  const searched = searches(intents);
  return (messages) => {
    const { called, results } = progress(messages);
    const wanted = [...searched.values()].filter((search) => !called.has(search.id));
    if (wanted.length > 0 && called.size === 0) {
      return {
        text: '',
        tool_calls: wanted.map(({ id, subject }) =>
          call(id, 'graph_search', {
            ...(subject.query ? { query: subject.query } : {}),
            ...(subject.year === undefined ? {} : { year_from: subject.year, year_to: subject.year }),
            limit: 3,
          }),
        ),
      };
    }
    if (![...called].some((id) => id.startsWith('plan-act-') || id.startsWith('plan-follow-'))) {
      const next = actions(intents, searched, results, memory);
      if (next.length > 0) return { text: '', tool_calls: next };
    }
    if (![...called].some((id) => id.startsWith('plan-follow-'))) {
      const follows = intents.flatMap((intent, index) => {
        const started = results.get(`plan-act-${index}`);
        return intent.kind === 'simulate' && started?.id && !started.error
          ? [call(`plan-follow-${index}`, 'follow_simulation', { simulation_id: String(started.id) })]
          : [];
      });
      if (follows.length > 0) return { text: '', tool_calls: follows };
    }
    return { text: answer(intents, searched, results, memory, verbosity), tool_calls: [] };
  };
}
