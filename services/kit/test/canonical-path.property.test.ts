import assert from 'node:assert/strict';
import fc from 'fast-check';
import { propertyParameters, propertyTimeout } from '../../../test/support/properties.ts';
import { type CanonicalPath, canonicalize, formatPath, MONTHS, PathError, parsePath, parsePrefix, SEGMENTS, toSlug } from '../src/moments/canonical-path.ts';
import { canonicalJson, tdfHash, toTdf } from '../src/moments/tdf.ts';

// The calendar as the spec defines it, written independently of the code under test: the proleptic
// Gregorian calendar with no year 0 (1 BCE is astronomical year 0). JS dates repeat every 400 years, so
// the year is folded into that cycle to stay within Date's range.
const astronomical = (year: number) => (year < 0 ? year + 1 : year);
const referenceDays = (year: number, monthNum: number): number => {
  const folded = 2000 + (((astronomical(year) % 400) + 400) % 400);
  const date = new Date(0);
  date.setUTCFullYear(folded, monthNum, 0);
  return date.getUTCDate();
};

const slugChar = fc.constantFrom(...'abcdefghijklmnopqrstuvwxyz0123456789');
const slugWord = fc.string({ unit: slugChar, minLength: 1, maxLength: 8 });
const slug = fc.array(slugWord, { minLength: 1, maxLength: 5 }).map((words) => words.join('-'));
const year = fc.oneof(
  fc.integer({ min: 1, max: 999_999 }),
  fc.integer({ min: -999_999, max: -1 }),
  fc.integer({ min: -3000, max: 2100 }).filter((y) => y !== 0),
);

const validPath: fc.Arbitrary<CanonicalPath> = fc
  .record({
    year,
    monthNum: fc.integer({ min: 1, max: 12 }),
    dayPick: fc.nat(),
    hour: fc.integer({ min: 0, max: 23 }),
    minute: fc.integer({ min: 0, max: 59 }),
    country: slug,
    region: slug,
    city: slug,
    slug,
  })
  .map(({ year, monthNum, dayPick, hour, minute, ...place }) => ({
    year,
    month: MONTHS[monthNum - 1]!,
    monthNum,
    day: (dayPick % referenceDays(year, monthNum)) + 1,
    time: `${String(hour).padStart(2, '0')}${String(minute).padStart(2, '0')}`,
    ...place,
  }));

/** Strings that look like paths: mostly plausible segments, some junk, so both acceptance and refusal are reached. */
const segmentLike = fc.oneof(
  slug,
  fc.integer({ min: -40, max: 2400 }).map(String),
  fc.constantFrom(...MONTHS, 'July', 'jul', '', '0', '00', '007', '2400', '1260', '0959', '-0', '+5', '1e3', ' 1', 'a--b', '-a', 'a-', 'ä', 'A'),
  fc.string({ maxLength: 6 }),
  fc.string({ unit: slugChar, minLength: 118, maxLength: 123 }),
);
/** A valid path with up to three segments replaced by such look-alikes, one dropped or one added. */
const pathLike = fc
  .tuple(
    validPath,
    fc.array(fc.tuple(fc.integer({ min: 0, max: 7 }), segmentLike), { maxLength: 3 }),
    fc.constantFrom('keep', 'keep', 'keep', 'drop', 'add'),
    fc.boolean(),
  )
  .map(([path, replacements, shape, slash]) => {
    const parts = formatPath(path).slice(1).split('/');
    for (const [index, segment] of replacements) parts[index] = segment;
    if (shape === 'drop') parts.pop();
    if (shape === 'add') parts.push(parts[7]!);
    return `${slash ? '/' : ''}${parts.join('/')}`;
  });

/** The spec's rules for one path, written plainly: the segments' formats, and days that exist. */
function referenceValid(input: string): boolean {
  const parts = (input.startsWith('/') ? input.slice(1) : input).split('/');
  if (parts.length !== 8) return false;
  const [y, m, d, t, ...places] = parts as [string, string, string, string, ...string[]];
  if (!/^-?[1-9][0-9]{0,5}$/.test(y)) return false;
  const monthNum = (MONTHS as readonly string[]).indexOf(m) + 1;
  if (monthNum === 0) return false;
  if (!/^[1-9][0-9]?$/.test(d) || Number(d) > referenceDays(Number(y), monthNum)) return false;
  if (!/^[0-9]{4}$/.test(t) || Number(t.slice(0, 2)) > 23 || Number(t.slice(2)) > 59) return false;
  return places.every((place) => place.length <= 120 && /^[a-z0-9]+(-[a-z0-9]+)*$/.test(place));
}

describe('canonical path: properties', function () {
  this.timeout(propertyTimeout(20_000));

  it('format then parse gives back the same path, and the canonical form is a fixed point', () => {
    fc.assert(
      fc.property(validPath, (path) => {
        const text = formatPath(path);
        assert.deepEqual(parsePath(text), path);
        assert.deepEqual(parsePath(text.slice(1)), path, 'the leading slash is optional');
        assert.equal(canonicalize(text), text);
        assert.equal(canonicalize(canonicalize(text.slice(1))), text);
      }),
      propertyParameters(1000),
    );
  });

  it('accepts exactly the paths the spec allows, and normalises nothing but the leading slash', () => {
    fc.assert(
      fc.property(pathLike, (input) => {
        let parsed: CanonicalPath | undefined;
        try {
          parsed = parsePath(input);
        } catch (error) {
          assert.ok(error instanceof PathError, `only PathError, got ${String(error)}`);
          assert.ok(['path', ...SEGMENTS].includes(error.segment));
        }
        assert.equal(parsed !== undefined, referenceValid(input), `accepted ${parsed !== undefined}, the spec says ${referenceValid(input)}: ${input}`);
        if (parsed) assert.equal(formatPath(parsed), input.startsWith('/') ? input : `/${input}`, 'an accepted path is already canonical');
      }),
      propertyParameters(3000),
    );
  });

  it('a day that does not exist in its month and year is refused, naming the day', () => {
    fc.assert(
      fc.property(validPath, fc.integer({ min: 1, max: 99 }), (path, extra) => {
        const days = referenceDays(path.year, path.monthNum);
        const day = days + 1 + (extra % (99 - days));
        assert.throws(
          () => parsePath(formatPath({ ...path, day })),
          (error: unknown) => error instanceof PathError && error.segment === 'day',
        );
      }),
      propertyParameters(500),
    );
  });

  it('every prefix of a valid path is a valid browse prefix, returned segment by segment', () => {
    fc.assert(
      fc.property(validPath, fc.integer({ min: 0, max: 8 }), fc.boolean(), (path, length, trailing) => {
        const parts = formatPath(path).slice(1).split('/').slice(0, length);
        assert.deepEqual(parsePrefix(`/${parts.join('/')}${trailing ? '/' : ''}`), parts);
      }),
      propertyParameters(500),
    );
  });

  it('toSlug makes a valid segment (or nothing) from any text, and is idempotent', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme', maxLength: 60 }), fc.integer({ min: 1, max: 130 }), (text, max) => {
        const result = toSlug(text, max);
        assert.ok(result === '' || /^[a-z0-9]+(-[a-z0-9]+)*$/.test(result), result);
        assert.ok(result.length <= max);
        assert.equal(toSlug(result, max), result);
      }),
      propertyParameters(1000),
    );
  });
});

/** JSON values as TDF payloads carry them: no undefined, no non-finite numbers (RFC 8785 refuses them). */
const jsonValue = fc.jsonValue({ maxDepth: 3 });
const envelope = fc.record({
  id: validPath.map(formatPath),
  source: fc.constantFrom('tempora-graph', 'tempora-generation'),
  timestamp: fc.date({ min: new Date('1970-01-01T00:00:00Z'), max: new Date('2100-01-01T00:00:00Z'), noInvalidDate: true }).map((date) => date.toISOString()),
  provenance: fc.dictionary(fc.string({ maxLength: 8 }), jsonValue, { maxKeys: 4 }),
  payload: fc.dictionary(fc.string({ maxLength: 8 }), jsonValue, { maxKeys: 8 }),
  entity_ids: fc.array(fc.string({ maxLength: 12 }), { maxLength: 4 }),
});

/** The same object with its keys inserted in another order, at every depth. */
function shuffled(value: unknown, flip: boolean): unknown {
  if (Array.isArray(value)) return value.map((item) => shuffled(item, flip));
  if (value === null || typeof value !== 'object') return value;
  const entries = Object.entries(value).map(([key, item]) => [key, shuffled(item, flip)] as const);
  if (flip) entries.reverse();
  return Object.fromEntries(entries);
}

describe('TDF record: properties', function () {
  this.timeout(propertyTimeout(20_000));

  it('a record survives JSON export and import with the same hash, and its hash ignores key order', () => {
    fc.assert(
      fc.property(envelope, fc.boolean(), (fields, flip) => {
        const record = toTdf(fields);
        const imported = JSON.parse(JSON.stringify(record)) as typeof record;
        assert.equal(tdfHash(imported.payload), record.tdf_hash);
        assert.equal(JSON.stringify(toTdf({ ...imported, payload: imported.payload })), JSON.stringify(record), 'export → import → export is identical');
        assert.equal(tdfHash(shuffled(fields.payload, flip)), record.tdf_hash);
        assert.deepEqual(JSON.parse(canonicalJson(fields.payload)), JSON.parse(JSON.stringify(fields.payload)), 'canonical JSON keeps the value');
      }),
      propertyParameters(500),
    );
  });
});
