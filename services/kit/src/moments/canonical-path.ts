/**
 * The canonical moment path, shared by the graph (its identifier) and the generation service (which
 * places a scene on it): `/year/month/day/time/country/region/city/slug`, e.g.
 * `/1969/july/20/2017/united-states/florida/cape-canaveral/apollo-11-moon-landing`.
 * Years are astronomical-free historical years: negative for BCE, never 0.
 */
export const SEGMENTS = ['year', 'month', 'day', 'time', 'country', 'region', 'city', 'slug'] as const;
export type SegmentName = (typeof SEGMENTS)[number];

export const MONTHS = ['january', 'february', 'march', 'april', 'may', 'june', 'july', 'august', 'september', 'october', 'november', 'december'] as const;
export type MonthName = (typeof MONTHS)[number];

export interface CanonicalPath {
  year: number;
  month: MonthName;
  /** 1–12. */
  monthNum: number;
  day: number;
  /** HHMM, four digits. */
  time: string;
  country: string;
  region: string;
  city: string;
  slug: string;
}

export class PathError extends Error {
  override name = 'PathError';
  readonly segment: SegmentName | 'path';

  constructor(segment: SegmentName | 'path', message: string) {
    super(message);
    this.segment = segment;
  }
}

const SLUG = /^[a-z0-9]+(?:-[a-z0-9]+)*$/;
const MAX_SLUG = 120;

/** Gregorian leap rule applied to the proleptic calendar; BCE year -1 is astronomical year 0. */
export function isLeapYear(year: number): boolean {
  const astronomical = year < 0 ? year + 1 : year;
  return (astronomical % 4 === 0 && astronomical % 100 !== 0) || astronomical % 400 === 0;
}

export function daysInMonth(year: number, monthNum: number): number {
  if (monthNum === 2) return isLeapYear(year) ? 29 : 28;
  return [4, 6, 9, 11].includes(monthNum) ? 30 : 31;
}

function slugSegment(name: SegmentName, value: string): string {
  if (!SLUG.test(value)) {
    throw new PathError(name, `${name} "${value}" must be a lowercase slug: letters a-z, digits and single hyphens`);
  }
  if (value.length > MAX_SLUG) throw new PathError(name, `${name} must be at most ${MAX_SLUG} characters`);
  return value;
}

/** A path segment (or entity id part) from free text: accents dropped, lowercase, hyphens between words. */
export function toSlug(text: string, max = MAX_SLUG): string {
  return text
    .normalize('NFKD')
    .replace(/[\u0300-\u036f]/g, '')
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .slice(0, max)
    .replace(/^-+|-+$/g, '');
}

/** Parses a canonical path, with or without its leading slash; throws PathError naming the failing segment. */
export function parsePath(input: string): CanonicalPath {
  const trimmed = input.startsWith('/') ? input.slice(1) : input;
  const parts = trimmed.split('/');
  if (parts.length !== SEGMENTS.length || parts.some((part) => part === '')) {
    throw new PathError('path', `a moment path has ${SEGMENTS.length} non-empty segments (${SEGMENTS.join('/')}); got ${parts.filter(Boolean).length}`);
  }
  const [yearText, monthText, dayText, time, country, region, city, slug] = parts as [string, string, string, string, string, string, string, string];

  if (!/^-?[1-9]\d{0,5}$/.test(yearText)) {
    throw new PathError('year', `year "${yearText}" must be a non-zero integer, negative for BCE`);
  }
  const year = Number(yearText);
  const monthIndex = MONTHS.indexOf(monthText as MonthName);
  if (monthIndex < 0) throw new PathError('month', `month "${monthText}" must be a lowercase month name such as "july"`);
  const monthNum = monthIndex + 1;
  if (!/^[1-9]\d?$/.test(dayText)) throw new PathError('day', `day "${dayText}" must be a day of the month without leading zeros`);
  const day = Number(dayText);
  const limit = daysInMonth(year, monthNum);
  if (day > limit) throw new PathError('day', `day ${day} does not exist in ${monthText} ${year} (${limit} days)`);
  const clock = /^([01]\d|2[0-3])([0-5]\d)$/.exec(time);
  if (!clock) throw new PathError('time', `time "${time}" must be 24-hour HHMM, from 0000 to 2359`);

  return {
    year,
    month: monthText as MonthName,
    monthNum,
    day,
    time,
    country: slugSegment('country', country),
    region: slugSegment('region', region),
    city: slugSegment('city', city),
    slug: slugSegment('slug', slug),
  };
}

export function formatPath(path: CanonicalPath): string {
  return `/${path.year}/${path.month}/${path.day}/${path.time}/${path.country}/${path.region}/${path.city}/${path.slug}`;
}

/** The canonical form (leading slash) of a valid path; throws PathError otherwise. */
export function canonicalize(input: string): string {
  return formatPath(parsePath(input));
}

/** Validates a path prefix of 0–8 segments, as used to browse the tree; returns it in canonical form. */
export function parsePrefix(input: string): string[] {
  const parts = input
    .replace(/^\/+|\/+$/g, '')
    .split('/')
    .filter(Boolean);
  if (parts.length > SEGMENTS.length) throw new PathError('path', `a prefix has at most ${SEGMENTS.length} segments`);
  // Fill the missing segments with valid placeholders so each given segment is checked by the full parser.
  const filler = ['1', 'january', '1', '0000', 'x', 'x', 'x', 'x'];
  const probe = SEGMENTS.map((_, index) => parts[index] ?? filler[index]);
  if (parts.length >= 3) {
    parsePath(probe.join('/'));
  } else {
    // A day alone cannot be checked against a month that is not given.
    parsePath([probe[0], probe[1], '1', ...probe.slice(3)].join('/'));
  }
  return parts;
}

export type Era = 'prehistory' | 'ancient' | 'classical' | 'late-antiquity' | 'medieval' | 'early-modern' | 'modern' | 'contemporary';

/** A coarse, Eurasia-centred periodisation used only for display and filtering. */
export function eraOf(year: number): Era {
  if (year < -3000) return 'prehistory';
  if (year < -800) return 'ancient';
  if (year < 300) return 'classical';
  if (year < 600) return 'late-antiquity';
  if (year < 1500) return 'medieval';
  if (year < 1800) return 'early-modern';
  if (year < 1945) return 'modern';
  return 'contemporary';
}
