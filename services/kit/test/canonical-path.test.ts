import assert from 'node:assert/strict';
import { canonicalize, daysInMonth, eraOf, formatPath, isLeapYear, PathError, parsePath, parsePrefix } from '../src/moments/canonical-path.ts';

const APOLLO = '/1969/july/20/2017/united-states/florida/cape-canaveral/apollo-11-moon-landing';

const failsOn = (path: string, segment: string) => {
  assert.throws(
    () => parsePath(path),
    (error: unknown) => error instanceof PathError && error.segment === segment,
    `${path} should fail on ${segment}`,
  );
};

describe('canonical path', () => {
  it('parses and formats a path, with or without the leading slash', () => {
    const parsed = parsePath(APOLLO.slice(1));
    assert.deepEqual(parsed, {
      year: 1969,
      month: 'july',
      monthNum: 7,
      day: 20,
      time: '2017',
      country: 'united-states',
      region: 'florida',
      city: 'cape-canaveral',
      slug: 'apollo-11-moon-landing',
    });
    assert.equal(formatPath(parsed), APOLLO);
    assert.equal(canonicalize(APOLLO), APOLLO);
  });

  it('accepts BCE years as negative numbers', () => {
    assert.equal(parsePath('/-490/september/12/0600/greece/attica/marathon/battle-of-marathon').year, -490);
  });

  it('names the failing segment', () => {
    failsOn('/1969/july/20/2017/us/fl/x', 'path');
    failsOn('/1969/july/20/2017/us/fl/x/y/z', 'path');
    failsOn('/1969/july//2017/us/fl/x/y', 'path');
    failsOn('/0/july/20/2017/us/fl/x/y', 'year');
    failsOn('/19a9/july/20/2017/us/fl/x/y', 'year');
    failsOn('/01969/july/20/2017/us/fl/x/y', 'year');
    failsOn('/1969/July/20/2017/us/fl/x/y', 'month');
    failsOn('/1969/7/20/2017/us/fl/x/y', 'month');
    failsOn('/1969/july/05/2017/us/fl/x/y', 'day');
    failsOn('/1969/july/0/2017/us/fl/x/y', 'day');
    failsOn('/1969/april/31/2017/us/fl/x/y', 'day');
    failsOn('/1969/february/29/2017/us/fl/x/y', 'day');
    failsOn('/1969/july/20/2417/us/fl/x/y', 'time');
    failsOn('/1969/july/20/1260/us/fl/x/y', 'time');
    failsOn('/1969/july/20/817/us/fl/x/y', 'time');
    failsOn('/1969/july/20/2017/United-States/fl/x/y', 'country');
    failsOn('/1969/july/20/2017/us/fl_x/x/y', 'region');
    failsOn('/1969/july/20/2017/us/fl/sao-paulo-/y', 'city');
    failsOn('/1969/july/20/2017/us/fl/x/apollo--11', 'slug');
  });

  it('knows leap years, including BCE ones on the proleptic calendar', () => {
    assert.equal(isLeapYear(2000), true);
    assert.equal(isLeapYear(1900), false);
    assert.equal(isLeapYear(2024), true);
    assert.equal(isLeapYear(-1), true, '1 BCE is astronomical year 0');
    assert.equal(isLeapYear(-5), true);
    assert.equal(daysInMonth(2024, 2), 29);
    assert.doesNotThrow(() => parsePath('/2024/february/29/1200/x/y/z/leap'));
  });

  it('validates browse prefixes segment by segment', () => {
    assert.deepEqual(parsePrefix(''), []);
    assert.deepEqual(parsePrefix('/1969/july/'), ['1969', 'july']);
    assert.throws(
      () => parsePrefix('/1969/jully'),
      (error: unknown) => error instanceof PathError && error.segment === 'month',
    );
    assert.throws(
      () => parsePrefix('/1969/april/31'),
      (error: unknown) => error instanceof PathError && error.segment === 'day',
    );
  });

  it('derives an era from the year', () => {
    assert.equal(eraOf(-3500), 'prehistory');
    assert.equal(eraOf(-490), 'classical');
    assert.equal(eraOf(1215), 'medieval');
    assert.equal(eraOf(1969), 'contemporary');
  });
});
