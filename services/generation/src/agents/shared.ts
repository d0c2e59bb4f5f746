import { z } from 'zod';
import type { Brief } from './types.ts';
import { anchorOf, yearLabel } from './world.ts';

/** The reply format every text agent's prompt ends with: the JSON Schema of its output. */
const formats = new WeakMap<z.ZodType, string>();
export function replyFormat(schema: z.ZodType): string {
  const cached = formats.get(schema);
  if (cached) return cached;
  const json = z.toJSONSchema(schema, { unrepresentable: 'any' }) as Record<string, unknown>;
  delete json.$schema;
  const format = `Reply with a single JSON object and nothing else (no prose, no code fences), matching this JSON Schema:\n${JSON.stringify(json)}`;
  formats.set(schema, format);
  return format;
}

/** Earlier outputs an agent reads, as labelled JSON sections. */
export function context(brief: Brief, keys: string[]): string {
  const sections = [`Query: ${brief.query}`];
  if (brief.graph_moment) sections.push(`Known moment from the Tempora graph: ${JSON.stringify(brief.graph_moment)}`);
  for (const key of keys) {
    if (brief[key] !== undefined && brief[key] !== null) sections.push(`${key}: ${JSON.stringify(brief[key])}`);
  }
  return sections.join('\n\n');
}

export const HISTORIAN =
  'You are part of Tempora, which renders a historical moment as a vivid, accurate scene. Be historically careful: no anachronisms, and say when evidence is thin.';

export function when(brief: Brief): string {
  const anchor = anchorOf(brief);
  return `${anchor.day} ${['January', 'February', 'March', 'April', 'May', 'June', 'July', 'August', 'September', 'October', 'November', 'December'][anchor.month - 1]} ${yearLabel(anchor.year)}`;
}

export const nonEmpty = z.string().trim().min(1);
export interface CharacterRef {
  name: string;
  role: string;
  is_historical: boolean;
  description: string;
}
export const charactersOf = (brief: Brief): CharacterRef[] => (brief.characters as { characters?: CharacterRef[] } | undefined)?.characters ?? [];
