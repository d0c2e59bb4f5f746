import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { type Database, type Knex, openDatabase } from '@tempora/kit/data';
import { createLogger } from '@tempora/kit/observability';
import { localChangeFeed } from '../src/change-feed.ts';
import { figureKeys, queryWords } from '../src/domain/figure-names.ts';
import { MomentInput } from '../src/domain/moment.ts';
import { GraphService } from '../src/graph-service.ts';
import { migrations } from '../src/migrations.ts';
import { GraphRepository } from '../src/repository/index.ts';
import { record } from './fixtures.ts';
import { type GraphHarness, serviceKey, startGraph, writer } from './harness.ts';

const logger = createLogger('graph', 'silent');
const at = (slug: string, year = 1800) => `/${year}/may/1/1200/figureland/north/alpha/${slug}`;

/** Moments named after the figures in them, so that an answer reads as the slugs of its figures. */
const FIGURES: Record<string, string[]> = {
  bonaparte: ['Napoleon Bonaparte'],
  'napoleon-iii': ['Napoleon III'],
  joan: ['Joan of Arc'],
  kierkegaard: ['Søren Kierkegaard'],
  darcy: ["William Knox D'Arcy"],
  'luther-king': ['Martin Luther King Jr.'],
  luther: ['Martin Luther'],
  walesa: ['Lech Wałęsa'],
  timur: ['Timur'],
  mao: ['Mao Zedong'],
  // Both figures in one moment: "napoleon arc" must not find it, as no figure holds both words.
  'joan-and-napoleon': ['Joan of Arc', 'Napoleon Bonaparte'],
};
const figureRecords = () => Object.entries(FIGURES).map(([slug, figures]) => record(at(slug), [], { figures }));

/** Which fixture moments the entity filter finds, by slug. */
const SEARCHES: Array<[entity: string, slugs: string[]]> = [
  ['Napoleon', ['bonaparte', 'joan-and-napoleon', 'napoleon-iii']],
  ['napoleon', ['bonaparte', 'joan-and-napoleon', 'napoleon-iii']],
  ['Bonaparte', ['bonaparte', 'joan-and-napoleon', 'napoleon-iii']], // Napoleon III is Louis-Napoléon Bonaparte
  ['NAPOLÉON bonaparte', ['bonaparte', 'joan-and-napoleon', 'napoleon-iii']],
  ['bonaparte napoleon', ['bonaparte', 'joan-and-napoleon', 'napoleon-iii']],
  ['napoleon iii', ['napoleon-iii']],
  ["jeanne d'arc", ['joan', 'joan-and-napoleon']],
  ['Jeanne d’Arc', ['joan', 'joan-and-napoleon']],
  ['joan of arc', ['joan', 'joan-and-napoleon']],
  ['napoleon arc', []],
  ['napo', []],
  ['soren', ['kierkegaard']],
  ['Søren KIERKEGAARD', ['kierkegaard']],
  ['darcy', ['darcy']],
  ["d'arcy", ['darcy']],
  ['martin luther', ['luther', 'luther-king']],
  ['luther king', ['luther-king']],
  ['walesa', ['walesa']],
  ['Tamerlane', ['timur']],
  ['mao tse-tung', ['mao']],
];

const slugs = (items: Array<{ path: string }>) => items.map((item) => item.path.split('/').pop()!).sort();

/**
 * The plan of the list query with the entity filter, with sequential and plain index scans switched off:
 * a plan is found only if the filter can use an index, and it names the index it uses.
 */
async function entityPlan(knex: Knex, entity: string[]): Promise<string> {
  const queries: Array<{ sql: string; bindings: unknown[] }> = [];
  const capture = (query: { sql: string; bindings?: unknown[] }) => queries.push({ sql: query.sql, bindings: [...(query.bindings ?? [])] });
  knex.on('query', capture);
  try {
    await new GraphRepository(knex).lists.list({ entity, sort: 'year', limit: 20, offset: 0 });
  } finally {
    knex.off('query', capture);
  }
  const select = queries.find((query) => /\blimit\b/.test(query.sql));
  assert.ok(select, 'the list query ran');
  return knex.transaction(async (trx) => {
    await trx.raw('set local enable_seqscan = off');
    await trx.raw('set local enable_indexscan = off');
    // The event shows the query as sent ($1, $2, … in order); knex.raw takes ? for each.
    const { rows } = (await trx.raw(`explain ${select.sql.replace(/\$\d+/g, '?')}`, select.bindings as Knex.RawBinding[])) as {
      rows: Array<{ 'QUERY PLAN': string }>;
    };
    return rows.map((row) => row['QUERY PLAN']).join('\n');
  });
}

describe('graph filters', function () {
  this.timeout(60_000);
  let h: GraphHarness;
  let database: Database;

  before(async () => {
    h = await startGraph({ AUTOLINK_MAX_PER_TYPE: '0' });
    const ingest = await h.post('/ingest/tdf', figureRecords(), writer);
    assert.equal(ingest.status, 200, JSON.stringify(ingest.body));
    database = await openDatabase({ service: 'graph', url: h.databaseUrl, dataDir: '', migrations, logger });
  });
  after(async () => {
    await database?.close();
    await h?.stop();
  });

  describe('invalid values are refused, never ignored', () => {
    const moment = at('bonaparte').slice(1);
    const cases: Array<[url: string, field: string]> = [
      // The issue's own: a NUL character, refused by the kit for every field, here for filters too.
      ['/api/v1/moments?tag=%00', 'query.tag'],
      ['/api/v1/moments?country=%00', 'query.country'],
      // Parameters the operation does not take: a typo, or a filter of another operation.
      ['/api/v1/moments?tag=war', 'query.tag'],
      ['/api/v1/moments?country=france', 'query.country'],
      ['/search?tag=war', 'query.tag'],
      [`/api/v1/moments/${moment}?formt=tdf`, 'query.formt'],
      [`/api/v1/graph/traverse/${moment}?weight=0.5`, 'query.weight'],
      ['/today?month=may&day=1&year=1800', 'query.year'],
      // Values a filter cannot match.
      ['/search?tags=', 'query.tags'],
      ['/search?tags=Space-Race', 'query.tags'],
      ['/search?tags=war,,peace', 'query.tags'],
      ['/search?country=France', 'query.country'],
      ['/search?city=new%20york', 'query.city'],
      ['/api/v1/moments?entity=%E2%80%99', 'query.entity'],
      ['/api/v1/moments?entity=---', 'query.entity'],
      // A blank number is not 0 (year_from= would have meant "from year 0").
      ['/api/v1/moments?year_from=', 'query.year_from'],
      ['/api/v1/moments?year_to=%20', 'query.year_to'],
      ['/api/v1/moments?offset=', 'query.offset'],
      ['/search?layer_min=', 'query.layer_min'],
      ['/random?layer_min=', 'query.layer_min'],
      ['/today?month=may&day=', 'query.day'],
      [`/api/v1/graph/traverse/${moment}?min_weight=`, 'query.min_weight'],
    ];
    for (const [url, field] of cases) {
      it(`${decodeURIComponent(url)} → 422 naming ${field}`, async () => {
        const reply = await h.get(url, serviceKey);
        assert.equal(reply.status, 422, JSON.stringify(reply.body));
        assert.equal(reply.headers.get('content-type'), 'application/problem+json');
        assert.ok(
          reply.body.errors.some((error: { path: string }) => error.path === field),
          JSON.stringify(reply.body.errors),
        );
      });
    }

    it('POST /ingest/tdf with a NUL character or a lone surrogate in a record → 422 naming the field, nothing stored', async () => {
      const path = '/1800/may/1/1200/figureland/north/alpha/nul-in-name';
      for (const [event_name, field] of [
        ['Nul\u0000name', 'body.payload.event_name'],
        ['Lone \ud800', 'body.payload.event_name'],
      ]) {
        const reply = await h.post('/ingest/tdf', { payload: { path, event_name, layer: 0 } }, writer);
        assert.equal(reply.status, 422, JSON.stringify(reply.body));
        assert.deepEqual(
          reply.body.errors.map((error: { path: string }) => error.path),
          [field],
        );
      }
      assert.equal((await h.get(`/api/v1/moments${path}`, serviceKey)).status, 404);
    });

    it('still applies valid values of the same filters', async () => {
      assert.deepEqual(slugs((await h.get('/search?tags=fixture&country=figureland&city=alpha&entity=walesa', serviceKey)).body.items), ['walesa']);
      assert.equal((await h.get('/api/v1/moments?year_from=1800&year_to=1800&offset=0')).body.total, Object.keys(FIGURES).length);
    });
  });

  describe('entity: figures are found the way a person searches', () => {
    for (const [entity, expected] of SEARCHES) {
      it(`${entity} → ${expected.join(', ') || 'nothing'}`, async () => {
        const reply = await h.get(`/api/v1/moments?entity=${encodeURIComponent(entity)}`);
        assert.equal(reply.status, 200, JSON.stringify(reply.body));
        assert.deepEqual(slugs(reply.body.items), [...expected].sort());
        assert.equal(reply.body.total, expected.length);
      });
    }

    it('matches the same way in /search and the MCP graph_search tool', async () => {
      assert.deepEqual(slugs((await h.get(`/search?entity=${encodeURIComponent('Jeanne d’Arc')}`, serviceKey)).body.items), ['joan', 'joan-and-napoleon']);
      const client = new Client({ name: 'graph-test', version: '1.0.0' });
      await client.connect(new StreamableHTTPClientTransport(new URL(`${h.url}/mcp/`)));
      try {
        const found = (await client.callTool({ name: 'graph_search', arguments: { entity: 'kierkegaard' } })) as unknown as {
          structuredContent: { items: Array<{ path: string }> };
        };
        assert.deepEqual(slugs(found.structuredContent.items), ['kierkegaard']);
        const refused = (await client.callTool({ name: 'graph_search', arguments: { country: 'France' } })) as unknown as {
          isError?: boolean;
          structuredContent: { error: string };
        };
        assert.equal(refused.isError, true);
        assert.match(refused.structuredContent.error, /country/);
      } finally {
        await client.close();
      }
    });

    it('uses the GIN index of entity_keys on PostgreSQL', async () => {
      assert.match(await entityPlan(database.knex, ['napoleon', 'bonaparte']), /moments_entity_keys_idx/);
    });

    it('re-derives keys stored under other rules when the service starts (an upgrade)', async () => {
      // As the previous release stored them: whole lower-cased names, no entity_names.
      await database
        .knex('moments')
        .where('path', at('bonaparte'))
        .update({ entity_keys: ['napoleon bonaparte'], entity_names: [] });
      await database.knex('graph_meta').where({ key: 'figure_keys' }).del();
      assert.equal((await h.get('/api/v1/moments?entity=bonaparte')).body.total, 2, 'not found while its keys are stale');
      const restarted = await startGraph({ AUTOLINK_MAX_PER_TYPE: '0' }, h.databaseUrl);
      try {
        assert.deepEqual(slugs((await restarted.get('/api/v1/moments?entity=napoleon%20bonaparte')).body.items), [
          'bonaparte',
          'joan-and-napoleon',
          'napoleon-iii',
        ]);
        const row = await database.knex('moments').where('path', at('bonaparte')).first('entity_keys', 'entity_names', 'updated_at');
        assert.deepEqual({ entity_keys: row.entity_keys, entity_names: row.entity_names }, figureKeys(['Napoleon Bonaparte']));
      } finally {
        await restarted.server.close();
      }
    });
  });
});

describe('graph filters on the embedded database (npm start)', function () {
  this.timeout(120_000);
  let dataDir: string;
  let database: Database;
  let graph: GraphService;

  before(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'tempora-graph-filters-'));
    database = await openDatabase({ service: 'graph', url: '', dataDir, migrations, logger });
    graph = new GraphService(new GraphRepository(database.knex), localChangeFeed, { autoLinkMaxPerType: 0, rebuildRatio: 1 }, logger);
    await graph.writeMoments(figureRecords().map((item) => MomentInput.parse(item.payload)));
  });
  after(async () => {
    await database?.close();
    if (dataDir) await rm(dataDir, { recursive: true, force: true });
  });

  it('matches figures as on PostgreSQL', async () => {
    for (const [entity, expected] of SEARCHES) {
      const page = await graph.list({ entity: queryWords(entity), sort: 'year', limit: 20, offset: 0 });
      assert.deepEqual(slugs(page.items), [...expected].sort(), entity);
    }
  });

  it('uses the GIN index of entity_keys', async () => {
    assert.match(await entityPlan(database.knex, ['napoleon']), /moments_entity_keys_idx/);
  });
});
