import { z } from 'zod';
import { context, HISTORIAN, nonEmpty, replyFormat } from './shared.ts';
import { defineAgent } from './types.ts';
import { anchorOf } from './world.ts';

const schema = z.object({
  event_name: nonEmpty,
  year: z.number().int().min(-100000).max(10000),
  month: z.number().int().min(1).max(12),
  day: z.number().int().min(1).max(31),
  time: z.string().regex(/^([01]\d|2[0-3])[0-5]\d$/, 'HHMM, 24-hour'),
  era: nonEmpty,
  date_precision: z.enum(['exact', 'day', 'month', 'year', 'approximate']),
  location: z.object({
    name: nonEmpty,
    city: nonEmpty,
    region: nonEmpty,
    country: nonEmpty,
    latitude: z.number().min(-90).max(90),
    longitude: z.number().min(-180).max(180),
  }),
});

export const timeline = defineAgent({
  name: 'Timeline',
  temperament: 'factual',
  role: 'Fixes when and where: year (negative for BCE), month, day, HHMM time, era, the place with coordinates, and how precise the date is.',
  system: `${HISTORIAN} You are the Timeline agent. Place the moment precisely in time and space. Years BCE are negative. Use lowercase hyphenated slugs for city, region and country.`,
  prompt: (brief) => `${context(brief, ['judge'])}\n\n${replyFormat(schema)}`,
  schema,
  defaults: { date_precision: 'approximate' },
  offline(brief) {
    const anchor = anchorOf(brief);
    return {
      event_name: anchor.event_name,
      year: anchor.year,
      month: anchor.month,
      day: anchor.day,
      time: anchor.time,
      era: anchor.era,
      date_precision: anchor.from_graph ? ('exact' as const) : ('approximate' as const),
      location: { ...anchor.place },
    };
  },
});
