import { z } from 'zod';
import { MONTHS } from '@tempora/kit/moments';
import { seedOf, sequence } from '@tempora/kit/providers';
import type { GraphService } from '../graph-service.ts';
import type { MomentInput } from '../domain/moment.ts';
import { utcDay, type SpendBudget } from './budget.ts';
import { askJson, type TextModel } from './model.ts';
import { PROPOSED_MOMENT_SHAPE, ProposedMoment, addProposed, proposedInput } from './moments.ts';

export const DailyMoments = z.object({ moments: z.array(ProposedMoment).max(20) });

/** graph_meta key recording that a date's run is done (value: the paths it added). */
export const dailyKey = (day: string) => `daily:${day}`;

/** Offline, placeholder entries on the date in deterministic past years, marked as placeholders. */
function offlineMoments(month: number, day: number, count: number): z.input<typeof DailyMoments> {
  const next = sequence(seedOf('daily', String(month), String(day)));
  return {
    moments: Array.from({ length: count }, (_, index) => {
      const year = 1500 + Math.floor(next() * 500);
      return {
        event_name: `Chronicle entry ${index + 1} for ${day} ${MONTHS[month - 1]} ${year}`,
        year,
        month,
        day,
        country: 'unknown',
        region: 'unknown',
        city: 'unknown',
        description: 'Placeholder written offline for today in history.',
        type: 'event',
        tags: ['today-in-history'],
        confidence: 0.1,
      };
    }),
  };
}

/**
 * Daily: adds moments that happened on today's month and day (UTC) in past years, at layer 1 pending the
 * judge, with their renders queued. Idempotent per date: once a date's run has written, running again
 * that day asks the model nothing and adds nothing. Returns the paths added (empty when already done).
 */
export async function runDaily(graph: GraphService, model: TextModel, budget: SpendBudget, count: number, now = new Date()): Promise<string[]> {
  const day = utcDay(now);
  if ((await graph.repository.meta.get(dailyKey(day))) !== undefined) return [];
  const month = now.getUTCMonth() + 1;
  const date = now.getUTCDate();
  const reply = await askJson(model, budget, {
    system: [
      'You add entries to a "today in history" graph of real historical moments.',
      `Propose ${count} real, well-documented events that happened on ${date} ${MONTHS[month - 1]} (any year before this one), varied in era and region.`,
      `Answer with one JSON object: {"moments": [${PROPOSED_MOMENT_SHAPE}]}. Every moment's month must be ${month} and its day ${date}.`,
    ].join('\n'),
    prompt: JSON.stringify({ month, day: date, count }),
    schema: DailyMoments,
    offline: () => offlineMoments(month, date, count),
    maxTokens: 400 * count,
  });
  const thisYear = now.getUTCFullYear();
  const inputs = reply.moments
    .filter((moment) => moment.month === month && moment.day === date && moment.year < thisYear)
    .slice(0, count)
    .map((moment) => proposedInput(moment, 'daily'))
    .filter((input): input is MomentInput => input !== undefined);
  const added = await addProposed(graph, inputs, 'daily');
  await graph.repository.meta.set(dailyKey(day), JSON.stringify(added));
  return added;
}
