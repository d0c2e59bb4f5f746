import { MONTHS, toSlug } from '@tempora/kit/moments';
import { z } from 'zod';
import { type EdgeInput, MOMENT_TYPES, MomentInput } from '../domain/moment.ts';
import type { GraphService } from '../graph-service.ts';
import { DESCRIBE_CLAIM } from '../repository/claims.ts';
import type { MomentRow } from '../repository/index.ts';
import type { SpendBudget } from './budget.ts';
import { askJson, type TextModel } from './model.ts';
import { addProposed, CLAIM_SECONDS, inputOf, PROPOSED_MOMENT_SHAPE, ProposedMoment, proposedInput, renderRequest } from './moments.ts';

/** The one edge type the spec lets the expander create: a direct cause, stored cause → effect. */
const EDGE = 'causes' as const;

export const Expansion = z.object({
  moments: z
    .array(
      ProposedMoment.extend({
        relation: z.enum(['cause', 'consequence']),
        weight: z.number().min(0).max(1).default(0.7),
        theme: z.string().max(200).default(''),
      }),
    )
    .max(10),
});

const system = (max: number) =>
  [
    'You extend a graph of real historical moments with their direct causes and consequences.',
    `Given one moment, propose at most ${max} other real, well-documented moments that directly caused it ("cause", earlier) or that it directly caused ("consequence", later).`,
    'Only events you are confident happened; no speculation, no duplicates of the given moment.',
    `Answer with one JSON object: {"moments": [${PROPOSED_MOMENT_SHAPE.slice(0, -1)}, "relation": "cause" | "consequence", "weight": 0-1 strength of the causal link, "theme": short label}]}.`,
  ].join('\n');

/** Layer 1 of a bare moment, as the model must give it: what the spec's layer table calls its metadata. */
export const Description = z.object({
  description: z.string().trim().min(1).max(2000),
  type: z.enum(MOMENT_TYPES).catch('event'),
  figures: z.array(z.string().trim().min(1).max(200)).max(20).default([]),
  tags: z.array(z.string()).max(20).default([]),
  latitude: z.number().min(-90).max(90).nullable().default(null),
  longitude: z.number().min(-180).max(180).nullable().default(null),
  confidence: z.number().min(0).max(1).default(0.5),
});

const DESCRIBE_SYSTEM = [
  'You write the metadata of one real historical moment for a graph of history.',
  'Given its name, date and place, answer with one JSON object: {"description": two to four neutral, factual sentences, "type": one of ' +
    MOMENT_TYPES.join('|') +
    ', "figures": [full names of the historical people involved], "tags": [lowercase topic words], "latitude": number or null, "longitude": number or null, "confidence": 0-1 how sure you are of the facts}.',
  'If you do not know the event, say so in the description and give a low confidence; never invent people or facts.',
].join('\n');

/**
 * What `askJson` would answer offline for a question the expander never asks offline: with no text model
 * it makes up no moment and no metadata, so nothing invented reaches a public read.
 */
const notAskedOffline = (): never => {
  throw new Error('the expander asks no model offline');
};

/** A bare moment's metadata from the model, as changes to the moment (merged with what it already has). */
async function describedByModel(model: TextModel, budget: SpendBudget, row: MomentRow, signal?: AbortSignal): Promise<Partial<MomentInput>> {
  const meta = await askJson(model, budget, {
    system: DESCRIBE_SYSTEM,
    prompt: JSON.stringify({
      path: row.path,
      event_name: row.event_name,
      date: `${row.day} ${MONTHS[row.month_num - 1]} ${row.year}`,
      place: [row.city, row.region, row.country].join(', '),
    }),
    schema: Description,
    offline: notAskedOffline,
    maxTokens: 800,
    ...(signal ? { signal } : {}),
  });
  return {
    description: meta.description,
    type: meta.type,
    figures: [...new Set([...row.figures, ...meta.figures])].slice(0, 50),
    tags: [...new Set([...row.tags, ...meta.tags.map((tag) => toSlug(tag, 60)).filter(Boolean)])].slice(0, 30),
    latitude: row.latitude ?? meta.latitude,
    longitude: row.longitude ?? meta.longitude,
    confidence: meta.confidence,
  };
}

/**
 * Layer 0 → 1: up to `batch` bare moments (a path and a name, that no one is rendering) get their
 * metadata from the model, written at layer 1 with status `pending` (model-written text waits for the
 * Judge, so the moment leaves public reads until it is passed), and a render job each, which the renderer
 * takes once the Judge has passed the moment (layer 2). Offline (no text model) the moment takes the same
 * steps with only what its author wrote: no description, figures, tags or place are made up, and the Judge
 * still rules before its render is paid for. Returns how many were described.
 */
export async function describeBare(graph: GraphService, model: TextModel, budget: SpendBudget, batch: number, signal?: AbortSignal): Promise<number> {
  const claims = graph.repository.claims;
  const offline = model.provider.kind === 'offline';
  let described = 0;
  for (const row of await claims.bareMoments(batch)) {
    if (!(await claims.claim(DESCRIBE_CLAIM, [row], CLAIM_SECONDS)).has(row.id)) continue;
    try {
      const metadata = offline ? {} : await describedByModel(model, budget, row, signal);
      const input = MomentInput.parse(inputOf(row, { layer: 1, status: 'pending', ...metadata }));
      await graph.writeMoments([input]);
      await graph.queueRender(input, { requestedBy: 'expander', request: renderRequest(input) });
    } catch (error) {
      await claims.release(DESCRIBE_CLAIM, [row.id]);
      throw error;
    }
    described += 1;
  }
  return described;
}

/** One expander run: bare moments described (layer 0 → 1), then under-connected moments expanded. */
export async function expandGraph(
  graph: GraphService,
  model: TextModel,
  budget: SpendBudget,
  settings: { batch: number; maxNew: number; minEdges: number },
  signal?: AbortSignal,
): Promise<{ described: number; expanded: number; added: number }> {
  const described = await describeBare(graph, model, budget, settings.batch, signal);
  return { described, ...(await expandUnderConnected(graph, model, budget, settings, signal)) };
}

/**
 * The Expander: takes up to `batch` public moments with few curated edges that it has not expanded yet,
 * asks the model for their direct causes and consequences, writes each new one at layer 1 (pending the
 * judge) with a `causes` edge to or from its anchor, and queues its render. Offline (no text model) it
 * proposes nothing, and leaves the anchors unexpanded for when a model is configured.
 */
export async function expandUnderConnected(
  graph: GraphService,
  model: TextModel,
  budget: SpendBudget,
  settings: { batch: number; maxNew: number; minEdges: number },
  signal?: AbortSignal,
): Promise<{ expanded: number; added: number }> {
  if (model.provider.kind === 'offline') return { expanded: 0, added: 0 };
  const anchors = await graph.repository.claims.underConnectedMoments(settings.batch, settings.minEdges);
  let added = 0;
  let expanded = 0;
  for (const anchor of anchors) {
    // Replicas of the expander never expand one moment twice: each claims an anchor before asking about it.
    if (!(await graph.repository.claims.claim('expander', [anchor], CLAIM_SECONDS)).has(anchor.id)) continue;
    try {
      added += await expandOne(graph, model, budget, settings, anchor, signal);
    } catch (error) {
      await graph.repository.claims.release('expander', [anchor.id]);
      throw error;
    }
    expanded += 1;
  }
  return { expanded, added };
}

/** Asks about one claimed anchor and writes what the model proposes; returns how many moments were added. */
async function expandOne(
  graph: GraphService,
  model: TextModel,
  budget: SpendBudget,
  settings: { maxNew: number },
  anchor: MomentRow,
  signal?: AbortSignal,
): Promise<number> {
  const expansion = await askJson(model, budget, {
    system: system(settings.maxNew),
    prompt: JSON.stringify({
      path: anchor.path,
      event_name: anchor.event_name,
      date: `${anchor.day} ${MONTHS[anchor.month_num - 1]} ${anchor.year}`,
      place: [anchor.city, anchor.region, anchor.country].join(', '),
      description: anchor.description,
      figures: anchor.figures,
    }),
    schema: Expansion,
    offline: notAskedOffline,
    maxTokens: 400 * settings.maxNew,
    ...(signal ? { signal } : {}),
  });
  const proposals: MomentInput[] = [];
  const fromAnchor: EdgeInput[] = [];
  for (const moment of expansion.moments.slice(0, settings.maxNew)) {
    const edge = { type: EDGE, weight: moment.weight, theme: moment.theme, description: '' };
    const input = proposedInput(moment, 'expander', moment.relation === 'cause' ? [{ ...edge, target: anchor.path }] : []);
    if (!input || input.path === anchor.path) continue;
    proposals.push(input);
    if (moment.relation === 'consequence') fromAnchor.push({ ...edge, target: input.path });
  }
  // The anchor gets its edges to its consequences without being written back from this (older) read of it.
  const added = (await addProposed(graph, proposals, 'expander', { from: anchor.path, edges: fromAnchor })).length;
  await graph.repository.claims.markExpanded([anchor.id]);
  return added;
}
