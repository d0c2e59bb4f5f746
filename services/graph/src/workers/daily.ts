import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { daysInMonth, MONTHS } from '@tempora/kit/moments';
import { z } from 'zod';
import { MOMENT_TYPES, type MomentInput } from '../domain/moment.ts';
import type { GraphService } from '../graph-service.ts';
import { type SpendBudget, utcDay } from './budget.ts';
import { askJson, type TextModel } from './model.ts';
import { addProposed, PROPOSED_MOMENT_SHAPE, ProposedMoment, proposedInput } from './moments.ts';

export const DailyMoments = z.object({ moments: z.array(ProposedMoment).max(20) });

/** graph_meta key recording that a date's run is done (value: the paths it added). */
export const dailyKey = (day: string) => `daily:${day}`;

/** The curated set of real events, at least one for every calendar day: what the Daily job draws from offline. */
export const DAILY_EVENTS_FILE = fileURLToPath(new URL('./daily-events.json', import.meta.url));

/** One curated event: a well-established fact with a certain date and a real place, described in our own words. */
export const CuratedEvent = z
  .strictObject({
    ...ProposedMoment.pick({ year: true, month: true, day: true, event_name: true, country: true, region: true, city: true }).shape,
    type: z.enum(MOMENT_TYPES),
    description: z.string().trim().min(20).max(200),
    tags: z
      .array(z.string().regex(/^[a-z0-9]+(?:-[a-z0-9]+)*$/))
      .min(1)
      .max(8),
    figures: z.array(z.string().trim().min(1).max(200)).max(10),
  })
  .refine((event) => proposedInput(ProposedMoment.parse(event), 'daily') !== undefined, 'its date or place makes no canonical path');
export type CuratedEvent = z.output<typeof CuratedEvent>;

const dayKey = (month: number, day: number) => `${month}-${day}`;

/** Every month-day pair of a leap year, 29 February included. */
const CALENDAR = MONTHS.flatMap((_, index) => Array.from({ length: daysInMonth(2000, index + 1) }, (_, day) => dayKey(index + 1, day + 1)));

const CuratedSet = z.array(CuratedEvent).superRefine((events, ctx) => {
  const covered = new Set(events.map((event) => dayKey(event.month, event.day)));
  const missing = CALENDAR.filter((key) => !covered.has(key));
  if (missing.length > 0)
    ctx.addIssue({ code: 'custom', message: `no event for ${missing.length} calendar day(s) (month-day): ${missing.slice(0, 10).join(', ')}` });
});

/** Reads and validates the curated set, by calendar day ("7-20"); throws when an entry is invalid or a day has none. */
export function readDailyEvents(file = DAILY_EVENTS_FILE): ReadonlyMap<string, readonly CuratedEvent[]> {
  const events = CuratedSet.parse(JSON.parse(readFileSync(file, 'utf8')));
  const byDay = new Map<string, CuratedEvent[]>();
  for (const event of events) {
    const key = dayKey(event.month, event.day);
    byDay.set(key, [...(byDay.get(key) ?? []), event]);
  }
  return byDay;
}

let dailyEvents: ReadonlyMap<string, readonly CuratedEvent[]> | undefined;

/** How sure the curated set is of its facts: hand-checked, with certain dates. */
const CURATED_CONFIDENCE = 0.95;

/**
 * Offline, the day's curated events: up to `count`, starting at a different one each year so that a day
 * with more events than `count` shows them in turn. Deterministic per date.
 */
function offlineMoments(month: number, day: number, year: number, count: number): z.input<typeof DailyMoments> {
  dailyEvents ??= readDailyEvents();
  const events = dailyEvents.get(dayKey(month, day)) ?? [];
  const start = events.length > 0 ? year % events.length : 0;
  return { moments: [...events.slice(start), ...events.slice(0, start)].slice(0, count).map((event) => ({ ...event, confidence: CURATED_CONFIDENCE })) };
}

/**
 * Daily: adds moments that happened on today's month and day (UTC) in past years, at layer 1 pending the
 * judge, with their renders queued: the model's proposals, or offline the curated set's events of the day.
 * A failed model call writes nothing and leaves the date to run again. Idempotent per date: once a date's
 * run has written, running again that day asks the model nothing and adds nothing. Returns the paths added
 * (empty when already done).
 */
export async function runDaily(graph: GraphService, model: TextModel, budget: SpendBudget, count: number, now = new Date()): Promise<string[]> {
  const day = utcDay(now);
  if ((await graph.repository.meta.get(dailyKey(day))) !== undefined) return [];
  const month = now.getUTCMonth() + 1;
  const date = now.getUTCDate();
  const thisYear = now.getUTCFullYear();
  const reply = await askJson(model, budget, {
    system: [
      'You add entries to a "today in history" graph of real historical moments.',
      `Propose ${count} real, well-documented events that happened on ${date} ${MONTHS[month - 1]} (any year before this one), varied in era and region.`,
      `Answer with one JSON object: {"moments": [${PROPOSED_MOMENT_SHAPE}]}. Every moment's month must be ${month} and its day ${date}.`,
    ].join('\n'),
    prompt: JSON.stringify({ month, day: date, count }),
    schema: DailyMoments,
    offline: () => offlineMoments(month, date, thisYear, count),
    maxTokens: 400 * count,
  });
  const inputs = reply.moments
    .filter((moment) => moment.month === month && moment.day === date && moment.year < thisYear)
    .slice(0, count)
    .map((moment) => proposedInput(moment, 'daily'))
    .filter((input): input is MomentInput => input !== undefined);
  const added = await addProposed(graph, inputs, 'daily');
  await graph.repository.meta.set(dailyKey(day), JSON.stringify(added));
  return added;
}
