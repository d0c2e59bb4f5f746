/**
 * Deterministic knowledge the offline provider derives its scenes from: the query's own words, a small
 * gazetteer and the graph service's moment when it knows one. Nothing here touches the network.
 */
import { MONTHS as MONTH_NAMES, toSlug } from '@tempora/kit/moments';
import { seedOf, sequence } from '@tempora/kit/providers';
import type { Brief, GraphMoment } from './types.ts';

export const MONTHS: readonly string[] = MONTH_NAMES;

interface Place {
  name: string;
  city: string;
  region: string;
  country: string;
  latitude: number;
  longitude: number;
}

const GAZETTEER: Array<[RegExp, Place]> = [
  [/\brom(e|an|ans)\b|\bcaesar\b|\bsenate\b/i, { name: 'Rome', city: 'rome', region: 'lazio', country: 'italy', latitude: 41.8925, longitude: 12.4853 }],
  [/\bathen(s|ian)\b/i, { name: 'Athens', city: 'athens', region: 'attica', country: 'greece', latitude: 37.9715, longitude: 23.7257 }],
  [
    /\bparis\b|\bbastille\b|\bfrench revolution\b/i,
    { name: 'Paris', city: 'paris', region: 'ile-de-france', country: 'france', latitude: 48.8566, longitude: 2.3522 },
  ],
  [/\blondon\b|\bwestminster\b/i, { name: 'London', city: 'london', region: 'england', country: 'united-kingdom', latitude: 51.5074, longitude: -0.1278 }],
  [/\bberlin\b/i, { name: 'Berlin', city: 'berlin', region: 'berlin', country: 'germany', latitude: 52.52, longitude: 13.405 }],
  [
    /\bphiladelphia\b|\bdeclaration of independence\b/i,
    { name: 'Philadelphia', city: 'philadelphia', region: 'pennsylvania', country: 'united-states', latitude: 39.9489, longitude: -75.15 },
  ],
  [
    /\bwashington\b/i,
    { name: 'Washington', city: 'washington', region: 'district-of-columbia', country: 'united-states', latitude: 38.8899, longitude: -77.0091 },
  ],
  [/\bmoon\b|\bapollo\b|\bhouston\b/i, { name: 'Houston', city: 'houston', region: 'texas', country: 'united-states', latitude: 29.5593, longitude: -95.09 }],
  [
    /\bkitty hawk\b|\bwright brothers\b/i,
    { name: 'Kitty Hawk', city: 'kitty-hawk', region: 'north-carolina', country: 'united-states', latitude: 36.0146, longitude: -75.6679 },
  ],
  [/\begypt\b|\bpharaoh\b|\bcairo\b|\bgiza\b/i, { name: 'Giza', city: 'giza', region: 'giza', country: 'egypt', latitude: 29.9792, longitude: 31.1342 }],
  [
    /\bconstantinople\b|\bistanbul\b|\bbyzant/i,
    { name: 'Constantinople', city: 'istanbul', region: 'marmara', country: 'turkey', latitude: 41.0082, longitude: 28.9784 },
  ],
  [/\bbeijing\b|\bforbidden city\b/i, { name: 'Beijing', city: 'beijing', region: 'beijing', country: 'china', latitude: 39.9042, longitude: 116.4074 }],
  [/\bkyoto\b|\btokyo\b|\bedo\b/i, { name: 'Kyoto', city: 'kyoto', region: 'kansai', country: 'japan', latitude: 35.0116, longitude: 135.7681 }],
  [/\bnew york\b|\bmanhattan\b/i, { name: 'New York', city: 'new-york', region: 'new-york', country: 'united-states', latitude: 40.7128, longitude: -74.006 }],
  [/\bflorence\b|\bmedici\b/i, { name: 'Florence', city: 'florence', region: 'tuscany', country: 'italy', latitude: 43.7696, longitude: 11.2558 }],
  [/\bwaterloo\b/i, { name: 'Waterloo', city: 'waterloo', region: 'walloon-brabant', country: 'belgium', latitude: 50.68, longitude: 4.412 }],
];

const UNKNOWN_PLACE: Place = { name: 'an unrecorded place', city: 'unknown', region: 'unknown', country: 'unknown', latitude: 0, longitude: 0 };

export const slugify = (text: string) => toSlug(text, 80) || 'moment';

export function random(brief: Brief, salt: string): () => number {
  return sequence(seedOf(brief.query.toLowerCase(), salt));
}

export const pick = <T>(next: () => number, items: readonly T[]): T => items[Math.floor(next() * items.length) % items.length] as T;

/** A year named in the query: "44 BC", "1969", "in 1066", "-490". */
export function yearOf(query: string): number | undefined {
  const bce = /\b(\d{1,4})\s*(bc|bce|b\.c\.)(?![a-z])/i.exec(query);
  if (bce) return -Number(bce[1]);
  const ce = /\b(\d{3,4})\s*(ad|ce|a\.d\.)?(?![\d])/i.exec(query);
  if (ce) return Number(ce[1]);
  return undefined;
}

export function monthOf(query: string): number | undefined {
  const index = MONTHS.findIndex((month) => new RegExp(`\\b${month}\\b`, 'i').test(query));
  return index >= 0 ? index + 1 : undefined;
}

export function dayOf(query: string): number | undefined {
  const match =
    /\b(\d{1,2})(st|nd|rd|th)?\s+(?:of\s+)?(january|february|march|april|may|june|july|august|september|october|november|december)\b|\b(january|february|march|april|may|june|july|august|september|october|november|december)\s+(\d{1,2})(st|nd|rd|th)?\b/i.exec(
      query,
    );
  const day = Number(match?.[1] ?? match?.[5]);
  return day >= 1 && day <= 31 ? day : undefined;
}

export function eraOf(year: number): string {
  if (year < -3000) return 'prehistory';
  if (year < 500) return 'antiquity';
  if (year < 1500) return 'middle-ages';
  if (year < 1800) return 'early-modern';
  if (year < 1914) return 'modern';
  return 'contemporary';
}

export function placeOf(brief: Brief): Place {
  const moment = brief.graph_moment;
  if (moment) {
    return {
      name: titleCase(moment.city),
      city: moment.city,
      region: moment.region,
      country: moment.country,
      latitude: moment.latitude ?? 0,
      longitude: moment.longitude ?? 0,
    };
  }
  for (const [pattern, place] of GAZETTEER) if (pattern.test(brief.query)) return place;
  return UNKNOWN_PLACE;
}

export const titleCase = (slug: string) =>
  slug
    .split(/[-\s]+/)
    .map((word) => word.charAt(0).toUpperCase() + word.slice(1))
    .join(' ');

const STOP = new Set([
  'The',
  'A',
  'An',
  'In',
  'On',
  'At',
  'Of',
  'And',
  'During',
  'When',
  'After',
  'Before',
  'First',
  'Day',
  'BC',
  'AD',
  'BCE',
  'CE',
  'Battle',
  'Signing',
  'Fall',
  'Death',
  'Declaration',
  'Independence',
  'Revolution',
  'Treaty',
  'War',
  'Landing',
  'Moon',
  'Storming',
]);

/** Proper names in the query ("Julius Caesar", "Neil Armstrong"), places and months excluded. */
export function namesIn(query: string): string[] {
  const names: string[] = [];
  for (const match of query.matchAll(/\b([A-Z][a-z]+(?:\s+(?:de|von|van|da)?\s*[A-Z][a-z]+)*)\b/g)) {
    const words = (match[1] as string).split(/\s+/).filter((word) => !STOP.has(word));
    const name = words.join(' ');
    if (!name || MONTHS.includes(name.toLowerCase())) continue;
    if (GAZETTEER.some(([, place]) => place.name.toLowerCase() === name.toLowerCase())) continue;
    if (!names.includes(name)) names.push(name);
  }
  // "Julius Caesar crosses the Rubicon": with full names present, lone capitalised words are more often places.
  const full = names.filter((name) => name.includes(' '));
  return full.length > 0 ? full : names;
}

export interface Anchor {
  event_name: string;
  year: number;
  month: number;
  day: number;
  time: string;
  era: string;
  place: Place;
  figures: string[];
  from_graph: boolean;
}

/** The moment's when, where and who: from the graph when it knows the moment, else from the query. */
export function anchorOf(brief: Brief): Anchor {
  const moment: GraphMoment | null = brief.graph_moment;
  const next = random(brief, 'anchor');
  if (moment) {
    return {
      event_name: moment.event_name,
      year: moment.year,
      month: moment.month_num,
      day: moment.day,
      time: moment.time,
      era: moment.era,
      place: placeOf(brief),
      figures: moment.figures,
      from_graph: true,
    };
  }
  const year = yearOf(brief.query) ?? 1000 + Math.floor(next() * 900);
  const month = monthOf(brief.query) ?? 1 + Math.floor(next() * 12);
  const day = dayOf(brief.query) ?? 1 + Math.floor(next() * 28);
  const hour = 6 + Math.floor(next() * 14);
  return {
    event_name: brief.query
      .replace(/\s+/g, ' ')
      .trim()
      .replace(/^./, (c) => c.toUpperCase())
      .slice(0, 120),
    year,
    month,
    day,
    time: `${String(hour).padStart(2, '0')}00`,
    era: eraOf(year),
    place: placeOf(brief),
    figures: namesIn(brief.query),
    from_graph: false,
  };
}

export const yearLabel = (year: number) => (year < 0 ? `${-year} BCE` : `${year}`);
