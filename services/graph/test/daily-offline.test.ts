import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Database, openDatabase } from '@tempora/kit/data';
import { daysInMonth, MONTHS, parsePath } from '@tempora/kit/moments';
import { createLogger } from '@tempora/kit/observability';
import { OfflineProvider } from '@tempora/kit/providers';
import { PostgresChangeFeed } from '../src/change-feed.ts';
import { GraphService } from '../src/graph-service.ts';
import { migrations } from '../src/migrations.ts';
import { GraphRepository } from '../src/repository/index.ts';
import { readSeed } from '../src/seed.ts';
import { SpendBudget } from '../src/workers/budget.ts';
import { type CuratedEvent, DAILY_EVENTS_FILE, dailyKey, readDailyEvents, runDaily } from '../src/workers/daily.ts';
import { judgePending } from '../src/workers/judge.ts';
import { ProposedMoment, proposedInput } from '../src/workers/moments.ts';
import { type GraphHarness, serviceKey, startGraph } from './harness.ts';

const logger = createLogger('graph-worker', process.env.WORKER_TEST_LOG ?? 'silent');
const offline = { provider: new OfflineProvider(), model: 'offline' };
const events = readDailyEvents();
const pathOf = (event: CuratedEvent) => proposedInput(ProposedMoment.parse(event), 'daily')!.path;
const ofDay = (month: number, day: number) => events.get(`${month}-${day}`) ?? [];
const PLACEHOLDER = /chronicle entry|unknown|placeholder/i;

describe('daily (offline): the curated set of real events', () => {
  it('has at least one event for each of the 366 calendar days, 29 February included', () => {
    const calendar = MONTHS.flatMap((_, index) => Array.from({ length: daysInMonth(2000, index + 1) }, (_, day) => `${index + 1}-${day + 1}`));
    assert.equal(calendar.length, 366);
    for (const key of calendar) assert.ok((events.get(key)?.length ?? 0) >= 1, `no event on ${key}`);
    assert.deepEqual([...events.keys()].sort(), [...calendar].sort(), 'no day outside the calendar');
  });

  it('makes a canonical moment path of every event, at a real place, with short text and no placeholder', () => {
    const all = [...events.values()].flat();
    const paths = all.map(pathOf);
    assert.equal(new Set(paths).size, paths.length, 'no two events share a path');
    for (const [index, event] of all.entries()) {
      const path = parsePath(paths[index]!);
      assert.deepEqual([path.year, path.monthNum, path.day], [event.year, event.month, event.day]);
      assert.ok(event.year < new Date().getUTCFullYear() && event.year !== 0);
      assert.ok(event.description.length <= 200, event.event_name);
      assert.ok(event.tags.length > 0, event.event_name);
      assert.doesNotMatch(JSON.stringify(event), PLACEHOLDER, event.event_name);
      for (const segment of [path.country, path.region, path.city]) assert.notEqual(segment, 'unknown');
    }
  });

  it('repeats no seeded moment (no two moments of one date in /today for one event)', () => {
    const seeded = new Set(
      readSeed()
        .map((moment) => parsePath(moment.path))
        .map((path) => `${path.year}-${path.monthNum}-${path.day}`),
    );
    const repeated = [...events.values()].flat().filter((event) => seeded.has(`${event.year}-${event.month}-${event.day}`));
    assert.deepEqual(
      repeated.map((event) => event.event_name),
      [],
    );
  });

  describe('is validated at load', () => {
    let directory: string;
    const raw = JSON.parse(readFileSync(DAILY_EVENTS_FILE, 'utf8')) as Array<Record<string, unknown>>;
    const load = (entries: unknown) => {
      const file = join(directory, 'events.json');
      writeFileSync(file, JSON.stringify(entries));
      return () => readDailyEvents(file);
    };
    before(() => {
      directory = mkdtempSync(join(tmpdir(), 'daily-events-'));
    });
    after(() => rmSync(directory, { recursive: true, force: true }));

    it('refuses a set that misses a calendar day', () => {
      assert.throws(load(raw.filter((event) => !(event.month === 2 && event.day === 29))), /no event for 1 calendar day\(s\) \(month-day\): 2-29/);
    });
    it('refuses an entry whose date does not exist (29 February of a common year)', () => {
      assert.throws(load([...raw, { ...raw[0], month: 2, day: 29, year: 1900 }]), /makes no canonical path/);
    });
    it('refuses a placeholder place, a long description, an unknown type or an unexpected field', () => {
      assert.throws(load([...raw, { ...raw[0], city: ' ' }]));
      assert.throws(load([...raw, { ...raw[0], description: 'x'.repeat(201) }]), /description/);
      assert.throws(load([...raw, { ...raw[0], type: 'rumour' }]), /type/);
      assert.throws(load([...raw, { ...raw[0], confidence: 0.1 }]), /confidence/);
    });
  });
});

describe('daily (offline): runs publish the curated events', function () {
  this.timeout(60_000);
  let api: GraphHarness;
  let database: Database;
  let graph: GraphService;

  before(async () => {
    api = await startGraph();
    // The worker's own connection pool and change feed, as in its own process.
    database = await openDatabase({ service: 'graph', url: api.databaseUrl, dataDir: '', migrations, logger });
    graph = new GraphService(
      new GraphRepository(database.knex),
      new PostgresChangeFeed(database.knex, logger),
      { autoLinkMaxPerType: 2, rebuildRatio: 0.25 },
      logger,
    );
  });
  after(async () => {
    await database?.close();
    await api?.stop();
  });

  const budget = () => new SpendBudget(graph.repository.spend, 'daily', 0);
  const today = async (month: number, day: number) => {
    const reply = await api.get(`/today?month=${month}&day=${day}&limit=100`, serviceKey);
    assert.equal(reply.status, 200);
    return reply.body as {
      total: number;
      items: Array<{ path: string; event_name: string; city: string; country: string; status: string; description: string }>;
    };
  };

  for (const date of [
    new Date(Date.UTC(2024, 1, 29, 3)),
    new Date(Date.UTC(2023, 11, 31, 23, 59)),
    new Date(Date.UTC(2025, 6, 20, 12)),
    new Date(Date.UTC(2026, 0, 1)),
  ]) {
    const month = date.getUTCMonth() + 1;
    const day = date.getUTCDate();
    it(`on ${date.toISOString().slice(0, 10)} publishes that day's real events, once`, async () => {
      const expected = ofDay(month, day);
      assert.ok(expected.length >= 1);
      const added = await runDaily(graph, offline, budget(), 5, date);
      assert.deepEqual([...added].sort(), expected.map(pathOf).sort());
      assert.deepEqual(await runDaily(graph, offline, budget(), 5, date), [], 'a second run that day adds nothing');
      assert.equal(
        await database
          .knex('moments')
          .where({ source_type: 'daily', month_num: month, day })
          .count({ n: '*' })
          .first()
          .then((row) => Number(row!.n)),
        expected.length,
        'no duplicate',
      );
      assert.equal((await today(month, day)).total, 0, 'proposals wait for the judge');

      await judgePending(graph, offline, new SpendBudget(graph.repository.spend, 'judge', 0), 100);
      const page = await today(month, day);
      assert.equal(page.total, expected.length);
      assert.deepEqual(page.items.map((item) => item.event_name).sort(), expected.map((event) => event.event_name).sort());
      assert.doesNotMatch(JSON.stringify(page), PLACEHOLDER);
      for (const item of page.items) {
        const event = expected.find((candidate) => candidate.event_name === item.event_name)!;
        assert.equal(item.status, 'active');
        assert.equal(item.description, event.description);
        assert.equal(item.path, pathOf(event));
        const moment = (await api.get(`/api/v1/moments${item.path}`)).body;
        assert.equal(moment.event_name, event.event_name, 'public read of the moment itself');
        assert.deepEqual(moment.figures, event.figures);
      }
      assert.deepEqual(JSON.parse((await graph.repository.meta.get(dailyKey(date.toISOString().slice(0, 10))))!), added);
    });
  }

  it('draws deterministically per date: with fewer moments asked than the day has, another year starts at another event', async () => {
    const [first, second] = ofDay(7, 14);
    assert.ok(first && second, 'two events on 14 July');
    // The day's events in turn: 2024 starts at the first (2024 mod 2), 2025 at the second, 2026 at the first again.
    assert.deepEqual(await runDaily(graph, offline, budget(), 1, new Date(Date.UTC(2024, 6, 14))), [pathOf(first)]);
    assert.deepEqual(await runDaily(graph, offline, budget(), 1, new Date(Date.UTC(2025, 6, 14))), [pathOf(second)]);
    assert.deepEqual(await runDaily(graph, offline, budget(), 1, new Date(Date.UTC(2026, 6, 14))), [], 'the same pick as in 2024, already written');
  });
});
