import { z } from 'zod';
import { MONTHS, toSlug } from '@tempora/kit/moments';
import { MOMENT_TYPES, MomentInput, type EdgeInput } from '../domain/moment.ts';
import type { GraphService } from '../graph-service.ts';
import { DESCRIBE_CLAIM } from '../repository/claims.ts';
import type { MomentRow } from '../repository/index.ts';
import type { SpendBudget } from './budget.ts';
import { askJson, type TextModel } from './model.ts';
import { CLAIM_SECONDS, PROPOSED_MOMENT_SHAPE, ProposedMoment, addProposed, inputOf, proposedInput, renderRequest } from './moments.ts';

/** The one edge type the spec lets the expander create: a direct cause, stored cause → effect. */
const EDGE = 'causes' as const;

export const Expansion = z.object({
  moments: z.array(ProposedMoment.extend({ relation: z.enum(['cause', 'consequence']), weight: z.number().min(0).max(1).default(0.7), theme: z.string().max(200).default('') })).max(10),
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

/** Offline, a description that says what it is; no figures, tags or place are made up. */
function offlineDescription(row: MomentRow): z.input<typeof Description> {
  const place = [row.city, row.region, row.country].filter((part) => part !== 'unknown').join(', ');
  return {
    description: `Placeholder written offline (no text model is configured): ${row.event_name}, ${row.day} ${MONTHS[row.month_num - 1]} ${row.year}${place ? `, ${place}` : ''}.`,
    type: row.type as z.input<typeof Description>['type'],
    confidence: 0.2,
  };
}

/**
 * Layer 0 → 1: up to `batch` bare moments (a path and a name, that no one is rendering) get their
 * metadata from the model, written at layer 1 with status `pending` (model-written text waits for the
 * Judge, so the moment leaves public reads until it is passed), and a render job each, which the renderer
 * takes once the Judge has passed the moment (layer 2). Returns how many were described.
 */
export async function describeBare(graph: GraphService, model: TextModel, budget: SpendBudget, batch: number, signal?: AbortSignal): Promise<number> {
  const claims = graph.repository.claims;
  let described = 0;
  for (const row of await claims.bareMoments(batch)) {
    if (!(await claims.claim(DESCRIBE_CLAIM, [row], CLAIM_SECONDS)).has(row.id)) continue;
    try {
      const meta = await askJson(model, budget, {
        system: DESCRIBE_SYSTEM,
        prompt: JSON.stringify({ path: row.path, event_name: row.event_name, date: `${row.day} ${MONTHS[row.month_num - 1]} ${row.year}`, place: [row.city, row.region, row.country].join(', ') }),
        schema: Description,
        offline: () => offlineDescription(row),
        maxTokens: 800,
        ...(signal ? { signal } : {}),
      });
      const input = MomentInput.parse(
        inputOf(row, {
          layer: 1,
          status: 'pending',
          description: meta.description,
          type: meta.type,
          figures: [...new Set([...row.figures, ...meta.figures])].slice(0, 50),
          tags: [...new Set([...row.tags, ...meta.tags.map((tag) => toSlug(tag, 60)).filter(Boolean)])].slice(0, 30),
          latitude: row.latitude ?? meta.latitude,
          longitude: row.longitude ?? meta.longitude,
          confidence: meta.confidence,
        }),
      );
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

/**
 * Offline, proposals are labelled placeholders: they are made only around moments people wrote, so that
 * a seeded graph is not filled with them and a placeholder never begets another.
 */
const OFFLINE_ANCHOR_SOURCES = ['ingest', 'generate'];

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

/** Offline, a consequence one year later in the same place, marked as such: deterministic and clearly not a real event. */
function offlineExpansion(anchor: MomentRow): z.input<typeof Expansion> {
  const year = anchor.year === -1 ? 1 : anchor.year + 1;
  return {
    moments: [
      {
        event_name: `Aftermath of ${anchor.event_name}`.slice(0, 200),
        year,
        month: anchor.month_num,
        day: Math.min(anchor.day, 28),
        time: anchor.time,
        country: anchor.country,
        region: anchor.region,
        city: anchor.city,
        description: `Placeholder proposed offline: what followed ${anchor.event_name}.`,
        type: 'event',
        figures: anchor.figures.slice(0, 3),
        tags: anchor.tags.slice(0, 5),
        confidence: 0.2,
        relation: 'consequence',
        weight: 0.5,
        theme: 'aftermath',
      },
    ],
  };
}

/**
 * The Expander: takes up to `batch` public moments with few curated edges that it has not expanded yet,
 * asks the model for their direct causes and consequences, writes each new one at layer 1 (pending the
 * judge) with a `causes` edge to or from its anchor, and queues its render.
 */
export async function expandUnderConnected(
  graph: GraphService,
  model: TextModel,
  budget: SpendBudget,
  settings: { batch: number; maxNew: number; minEdges: number },
  signal?: AbortSignal,
): Promise<{ expanded: number; added: number }> {
  const offline = model.provider.kind === 'offline';
  const anchors = await graph.repository.claims.underConnectedMoments(settings.batch, settings.minEdges, offline ? OFFLINE_ANCHOR_SOURCES : undefined);
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
async function expandOne(graph: GraphService, model: TextModel, budget: SpendBudget, settings: { maxNew: number }, anchor: MomentRow, signal?: AbortSignal): Promise<number> {
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
    offline: () => offlineExpansion(anchor),
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
