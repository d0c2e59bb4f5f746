import type { z } from 'zod';

export const AGENT_NAMES = [
  'Judge',
  'Timeline',
  'Grounding',
  'Scene',
  'Characters',
  'CharacterBio',
  'Graph',
  'Moment',
  'Camera',
  'Dialog',
  'Critique',
  'ImagePrompt',
  'Optimizer',
  'ImageGen',
] as const;
export type AgentName = (typeof AGENT_NAMES)[number];

/** The order in which the stream reports completions (platform-interface.md, Events). */
export const EVENT_ORDER: AgentName[] = [
  'Judge',
  'Timeline',
  'Grounding',
  'Scene',
  'Characters',
  'Moment',
  'Camera',
  'Dialog',
  'Critique',
  'ImagePrompt',
  'Optimizer',
  'ImageGen',
];

/** Built-in temperature per kind of agent (llm_params.temperature overrides all of them). */
export type Temperament = 'factual' | 'creative' | 'scene' | 'dialog';
export const TEMPERATURES: Record<Temperament, number> = { factual: 0.2, creative: 0.85, scene: 0.7, dialog: 0.85 };

/** What the graph service knows about the queried moment (a subset of its moment view). */
export interface GraphMoment {
  path: string;
  event_name: string;
  description: string;
  year: number;
  month_num: number;
  day: number;
  time: string;
  country: string;
  region: string;
  city: string;
  era: string;
  latitude: number | null;
  longitude: number | null;
  figures: string[];
  tags: string[];
  confidence: number;
  /** Where the graph serves it. */
  url: string;
}

/** Everything an agent may read: the query, the graph's moment and earlier agents' outputs (plain JSON). */
export interface Brief {
  query: string;
  graph_moment: GraphMoment | null;
  [earlier: string]: unknown;
}

export type TextAgentName = Exclude<AgentName, 'ImageGen'>;

/**
 * A text agent: its prompt, output schema, defaults, and the deterministic output of the offline provider.
 * Its output type is its schema's (`AgentOutput` in index.ts).
 */
export interface TextAgent<S extends z.ZodType = z.ZodType> {
  name: TextAgentName;
  temperament: Temperament;
  /** What the agent does, in one line (its row in docs/generation.md says the same). */
  role: string;
  system: string;
  prompt(brief: Brief): string;
  schema: S;
  /** Filled in under the model's output before validation (missing optional fields). */
  defaults: Record<string, unknown>;
  offline(brief: Brief): z.infer<S>;
  /** Ask the native provider to ground with web search. */
  grounding?: boolean;
}

export const defineAgent = <S extends z.ZodType>(agent: TextAgent<S>): TextAgent<S> => agent;
