import { canonicalize, MONTHS, toSlug } from '@tempora/kit/moments';
import { z } from 'zod';
import { type EdgeInput, MOMENT_TYPES, MomentInput } from '../domain/moment.ts';
import type { GraphService } from '../graph-service.ts';
import type { MomentRow } from '../repository/index.ts';
import { momentPayload } from '../views.ts';

/**
 * How long a judge or expander replica holds a moment it is asking the model about (worker_claims): well
 * past one model call (PROVIDER_TIMEOUT_MS, 60 s by default), so only a replica that died lets it lapse.
 */
export const CLAIM_SECONDS = 600;

/** A stored moment as a write of itself, so a worker can change a few fields through GraphService.writeMoments. */
export function inputOf(row: MomentRow, changes: Partial<MomentInput> = {}): MomentInput {
  // The stored row passed the same validation when it was written; its text columns hold MomentInput's enums.
  return { ...(momentPayload(row, []) as MomentInput), ...changes };
}

/** A moment as the expander and daily ask the model for it. */
export const ProposedMoment = z.object({
  event_name: z.string().trim().min(3).max(200),
  year: z
    .number()
    .int()
    .min(-20000)
    .max(2100)
    .refine((year) => year !== 0, 'there is no year 0'),
  month: z.number().int().min(1).max(12),
  day: z.number().int().min(1).max(31),
  time: z
    .string()
    .regex(/^([01]\d|2[0-3])[0-5]\d$/)
    .default('1200'),
  country: z.string().trim().min(1).max(80),
  region: z.string().trim().min(1).max(80),
  city: z.string().trim().min(1).max(80),
  description: z.string().max(2000).default(''),
  type: z.enum(MOMENT_TYPES).catch('event'),
  figures: z.array(z.string().trim().min(1).max(200)).max(20).default([]),
  tags: z.array(z.string()).max(20).default([]),
  confidence: z.number().min(0).max(1).default(0.5),
});
export type ProposedMoment = z.output<typeof ProposedMoment>;

export const PROPOSED_MOMENT_SHAPE =
  '{"event_name": string, "year": integer (negative for BCE, never 0), "month": 1-12, "day": 1-31, "time": "HHMM", "country": string, "region": string, "city": string, "description": string, "type": one of ' +
  MOMENT_TYPES.join('|') +
  ', "figures": [string], "tags": [lowercase words], "confidence": 0-1}';

/**
 * A proposed moment as a layer-1 write awaiting the judge (`status: pending`), or undefined when its
 * date or place cannot make a canonical path (a 30 February, an empty slug).
 */
export function proposedInput(moment: ProposedMoment, sourceType: string, edges: EdgeInput[] = []): MomentInput | undefined {
  const place = [moment.country, moment.region, moment.city, moment.event_name].map((text) => toSlug(text));
  if (place.some((segment) => segment === '')) return undefined;
  let path: string;
  try {
    path = canonicalize(`/${moment.year}/${MONTHS[moment.month - 1]}/${moment.day}/${moment.time}/${place.join('/')}`);
  } catch {
    return undefined;
  }
  const parsed = MomentInput.safeParse({
    path,
    event_name: moment.event_name,
    description: moment.description,
    type: moment.type,
    layer: 1,
    status: 'pending',
    figures: moment.figures,
    tags: [...new Set(moment.tags.map((tag) => toSlug(tag, 60)).filter(Boolean))],
    confidence: moment.confidence,
    source_type: sourceType,
    edges,
  });
  return parsed.success ? parsed.data : undefined;
}

/** What a worker asks the renderer for a moment it wrote: its name and description, balanced, with an image. */
export const renderRequest = (input: MomentInput) => ({
  query: (input.description ? `${input.event_name}: ${input.description}` : input.event_name).slice(0, 500),
  preset: 'balanced',
  generate_image: true,
});

/**
 * Writes the moments whose paths are not stored yet (a model's proposal never overwrites a curated
 * moment), then `links`' edges from a stored moment to them, and queues a render job for each. Returns
 * the paths written.
 */
export async function addProposed(
  graph: GraphService,
  inputs: readonly MomentInput[],
  requestedBy: string,
  links?: { from: string; edges: readonly EdgeInput[] },
): Promise<string[]> {
  const existing = await graph.repository.moments.existingPaths(inputs.map((input) => input.path));
  const fresh = [...new Map(inputs.filter((input) => !existing.has(input.path)).map((input) => [input.path, input])).values()];
  if (fresh.length === 0) return [];
  await graph.writeMoments(fresh);
  const written = new Set(fresh.map((input) => input.path));
  const edges = links?.edges.filter((edge) => written.has(edge.target)) ?? [];
  if (links && edges.length > 0) await graph.addEdges(links.from, edges);
  for (const input of fresh) {
    await graph.queueRender(input, { requestedBy, request: renderRequest(input) });
  }
  return fresh.map((input) => input.path);
}
