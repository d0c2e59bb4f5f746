import { z } from 'zod';
import { MONTHS } from '@tempora/kit/moments';
import type { EdgeInput, MomentInput } from '../domain/moment.ts';
import type { GraphService } from '../graph-service.ts';
import type { MomentRow } from '../repository/index.ts';
import type { SpendBudget } from './budget.ts';
import { askJson, type TextModel } from './model.ts';
import { CLAIM_SECONDS, PROPOSED_MOMENT_SHAPE, ProposedMoment, addProposed, inputOf, proposedInput } from './moments.ts';

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
  const anchors = await graph.repository.claims.underConnectedMoments(settings.batch, settings.minEdges);
  let added = 0;
  let expanded = 0;
  for (const anchor of anchors) {
    // Replicas of the expander never expand one moment twice: each claims an anchor before asking about it.
    if (!(await graph.repository.claims.claim('expander', [anchor.id], CLAIM_SECONDS)).has(anchor.id)) continue;
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
  const added = (await addProposed(graph, proposals, 'expander', fromAnchor.length > 0 ? [inputOf(anchor, { edges: fromAnchor })] : [])).length;
  await graph.repository.claims.markExpanded([anchor.id]);
  return added;
}
