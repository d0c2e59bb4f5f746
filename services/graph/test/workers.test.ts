import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { type Database, openDatabase } from '@tempora/kit/data';
import { MONTHS } from '@tempora/kit/moments';
import { createLogger } from '@tempora/kit/observability';
import { OfflineProvider, type TextProvider, type TextRequest } from '@tempora/kit/providers';
import { FakeGeneration } from '../../../test/support/stand-ins/generation.ts';
import { waitFor } from '../../../test/support/wait.ts';
import { PostgresChangeFeed } from '../src/change-feed.ts';
import { GraphService } from '../src/graph-service.ts';
import { migrations } from '../src/migrations.ts';
import { GraphRepository } from '../src/repository/index.ts';
import { BudgetExhausted, nextUtcDay, SpendBudget } from '../src/workers/budget.ts';
import { dailyKey, readDailyEvents, runDaily } from '../src/workers/daily.ts';
import { describeBare, expandUnderConnected } from '../src/workers/expander.ts';
import { GenerationClient } from '../src/workers/generation-client.ts';
import { judgePending } from '../src/workers/judge.ts';
import { ModelReplyError } from '../src/workers/model.ts';
import { Renderer, type RendererOptions } from '../src/workers/renderer.ts';
import { record } from './fixtures.ts';
import { type GraphHarness, SERVICE_KEY, serviceKey, startGraph, writer } from './harness.ts';

const logger = createLogger('graph-worker', process.env.WORKER_TEST_LOG ?? 'silent');
const offline = { provider: new OfflineProvider(), model: 'offline' };

/** The offline model, slowed down and counting what it is asked (by prompt), so replicas overlap. */
function countingModel(delayMs: number) {
  const prompts: string[] = [];
  const inner = new OfflineProvider();
  const provider: TextProvider = {
    kind: inner.kind,
    async generateText(request: TextRequest) {
      prompts.push(request.prompt);
      await new Promise((resolve) => setTimeout(resolve, delayMs));
      return inner.generateText(request);
    },
  };
  return { model: { provider, model: 'offline' }, prompts };
}
/**
 * A configured text model's stand-in (an aggregator to the workers) answering the expander as a model
 * would: a bare moment's metadata, or one consequence of the anchor asked about, a year later at the same
 * place. Slowed down and counting what it is asked (by prompt), so replicas overlap.
 */
function modelStandIn(delayMs: number) {
  const prompts: string[] = [];
  const provider: TextProvider = {
    kind: 'aggregator',
    async generateText(request: TextRequest) {
      prompts.push(request.prompt);
      await new Promise((resolve) => setTimeout(resolve, delayMs));
      const asked = JSON.parse(request.prompt) as { path: string; event_name: string };
      const [year, month, day, time, country, region, city] = asked.path.split('/').slice(1) as string[];
      const reply = request.system.includes('metadata')
        ? {
            description: `${asked.event_name}, as the model tells it.`,
            type: 'construction',
            figures: ['Fulgence Bienvenüe'],
            tags: ['Public Transport'],
            latitude: 48.85,
            longitude: 2.35,
            confidence: 0.8,
          }
        : {
            moments: [
              {
                event_name: `Consequence of ${asked.event_name}`,
                year: Number(year) + 1,
                month: MONTHS.indexOf(month as (typeof MONTHS)[number]) + 1,
                day: Number(day),
                time,
                country,
                region,
                city,
                relation: 'consequence',
                weight: 0.5,
                theme: 'consequence',
              },
            ],
          };
      return {
        text: JSON.stringify(reply),
        provider: 'aggregator',
        model: request.model,
        usage: { input_tokens: 100, output_tokens: 100, thinking_tokens: 0, total_tokens: 200 },
      };
    },
  };
  return { model: { provider, model: 'test/model' }, prompts };
}
const path = (slug: string, year = 1903) => `/${year}/july/1/1516/france/ile-de-france/montgeron/${slug}`;

describe('graph background workers', function () {
  this.timeout(60_000);
  let api: GraphHarness;
  let database: Database;
  let graph: GraphService;
  const generation = new FakeGeneration();

  before(async () => {
    api = await startGraph({ AUTOLINK_MAX_PER_TYPE: '2' });
    // The worker's own connection pool and change feed, as in its own process.
    database = await openDatabase({ service: 'graph', url: api.databaseUrl, dataDir: '', migrations, logger });
    graph = new GraphService(
      new GraphRepository(database.knex),
      new PostgresChangeFeed(database.knex, logger),
      { autoLinkMaxPerType: 2, rebuildRatio: 0.25 },
      logger,
    );
    await generation.start();
  });
  after(async () => {
    await generation.stop();
    await database?.close();
    await api?.stop();
  });
  beforeEach(async () => {
    generation.status = 200;
    generation.delayMs = 0;
    generation.coordinates = [48.7, 2.46];
    generation.reshape = undefined;
    generation.calls.length = 0;
    // Each test sees only its own jobs and spend.
    await database.knex('render_jobs').del();
    await database.knex('worker_spend').del();
  });

  const renderer = (options: Partial<RendererOptions> = {}) =>
    new Renderer({
      graph,
      generation: new GenerationClient(generation.url, SERVICE_KEY, 10_000),
      budget: new SpendBudget(graph.repository.spend, 'renderer', 100),
      logger,
      workerId: randomUUID(),
      concurrency: 2,
      maxAttempts: 3,
      backoffMs: 1,
      staleMs: 60_000,
      pollMs: 50,
      ...options,
    });

  const queue = async (slug: string, extra: Record<string, unknown> = {}) => {
    const reply = await api.post('/generate', { path: path(slug), event_name: `The ${slug.replace(/-/g, ' ')}`, ...extra }, writer);
    assert.equal(reply.status, 202);
    return reply.body.job.id as string;
  };
  const drain = async (worker: Renderer) => {
    await worker.tick();
    await worker.idle();
  };
  const job = async (id: string) => (await api.get(`/api/v1/graph/jobs/${id}`, writer)).body;

  describe('renderer', () => {
    it('waits for the Judge: a job whose moment is pending is not rendered until the moment is passed', async () => {
      const slug = 'pending-stage';
      const id = await queue(slug);
      const pending = { payload: { path: path(slug), event_name: 'The pending stage', layer: 0, status: 'pending' } };
      assert.equal((await api.post('/ingest/tdf', pending, writer)).status, 200);
      const worker = renderer();
      await drain(worker);
      assert.equal((await job(id)).status, 'queued', 'not claimed: nothing is paid for that may be rejected');
      assert.equal(generation.calls.length, 0);
      await judgePending(graph, offline, new SpendBudget(graph.repository.spend, 'judge', 0), 100);
      await drain(worker);
      assert.equal((await job(id)).status, 'succeeded');
    });

    it("leaves a moment without coordinates when the scene's place is unknown (0, 0)", async () => {
      generation.coordinates = [0, 0];
      const id = await queue('nowhere-in-particular');
      await drain(renderer());
      assert.equal((await job(id)).status, 'succeeded');
      const moment = (await api.get(`/api/v1/moments${path('nowhere-in-particular')}`)).body;
      assert.equal(moment.layer, 2);
      assert.equal(moment.latitude, null);
      assert.equal(moment.longitude, null);
    });

    it('renders a queued job end to end: layer 2 with the scene, job succeeded, the API replica sees it', async () => {
      const id = await queue('first-tour-de-france');
      await drain(renderer());

      assert.equal(generation.calls.length, 1);
      assert.equal(generation.calls[0]!.serviceKey, SERVICE_KEY);
      assert.equal(generation.calls[0]!.body.query, 'The first tour de france');
      assert.deepEqual(generation.calls[0]!.body.request_context, { graph_render_job: id, path: path('first-tour-de-france') });
      assert.equal(generation.calls[0]!.body.visibility, undefined, "a public moment's scene is public");
      assert.equal(generation.calls[0]!.userId, undefined, 'and ownerless');
      const done = await job(id);
      assert.equal(done.status, 'succeeded');
      assert.equal(done.attempts, 1);
      assert.equal(done.error, null);
      assert.match(done.scene_id, /^[0-9a-f-]{36}$/);

      const moment = (await api.get(`/api/v1/moments${path('first-tour-de-france')}`)).body;
      assert.equal(moment.layer, 2);
      assert.equal(moment.image_url, `${generation.url}/api/v1/timepoints/${done.scene_id}/image`);
      assert.equal(moment.description, 'Sixty cyclists set off on a 2,428 km race around France.');
      assert.deepEqual(moment.figures, ['Henri Desgrange']);
      assert.equal(moment.confidence, 0.82);
      assert.equal(moment.latitude, 48.7);
      assert.equal(moment.longitude, 2.46);

      // The API replica's in-memory node store learns the new layer through the change feed.
      await waitFor('layer 2 in the API replica', async () => {
        const traversal = await api.get(`/api/v1/graph/traverse${path('first-tour-de-france')}?depth=1`, serviceKey);
        return traversal.body.nodes?.[0]?.layer === 2;
      });
    });

    it("keeps a private moment's render private: its scene is private to the writer who asked for it", async () => {
      const slug = 'a-private-stage';
      const hidden = { payload: { path: path(slug), event_name: 'A private stage', layer: 1, visibility: 'private', description: 'Not for everyone.' } };
      assert.equal((await api.post('/ingest/tdf', hidden, writer)).status, 200);
      const id = await queue(slug);
      await drain(renderer());
      assert.equal((await job(id)).status, 'succeeded');
      assert.equal(generation.calls.length, 1);
      assert.equal(generation.calls[0]!.body.visibility, 'private');
      assert.equal(generation.calls[0]!.userId, 'writer:tester', 'the scene and its image keep an owner, so they are never public');
      assert.equal(generation.calls[0]!.serviceKey, SERVICE_KEY);
      const moment = (await api.get(`/api/v1/moments${path(slug)}`, writer)).body;
      assert.equal(moment.layer, 2);
      assert.equal(moment.visibility, 'private', 'the render leaves the moment private');
      assert.equal((await api.get(`/api/v1/moments${path(slug)}`)).status, 404);
    });

    it('two renderers never process the same job twice', async () => {
      const ids = await Promise.all(Array.from({ length: 8 }, (_, n) => queue(`race-stage-${n}`)));
      generation.delayMs = 20;
      const one = renderer({ concurrency: 3 });
      const two = renderer({ concurrency: 3 });
      for (let round = 0; round < 4; round += 1) {
        await Promise.all([one.tick(), two.tick()]);
        await Promise.all([one.idle(), two.idle()]);
      }
      const rendered = generation.calls.map((call) => (call.body.request_context as { graph_render_job: string }).graph_render_job);
      assert.deepEqual([...rendered].sort(), [...ids].sort(), 'each job rendered exactly once');
      assert.ok(one.processed > 0 && two.processed > 0, 'both replicas took jobs');
      for (const id of ids) assert.equal((await job(id)).status, 'succeeded');
    });

    it('retries a failed render with back-off, then fails it with the error', async () => {
      generation.status = 503;
      const id = await queue('retried-stage');
      const worker = renderer({ maxAttempts: 2, backoffMs: 200 });
      await drain(worker);
      let state = await job(id);
      assert.equal(state.status, 'queued');
      assert.equal(state.attempts, 1);
      assert.match(state.error, /answered 503: agent Timeline failed/);
      await drain(worker);
      assert.equal(generation.calls.length, 1, 'not retried before its back-off');
      // Waits out the job's back-off: the clock is what makes it due again.
      await new Promise((resolve) => setTimeout(resolve, 250));
      await drain(worker);
      state = await job(id);
      assert.equal(state.status, 'failed');
      assert.equal(state.attempts, 2);
      assert.equal(generation.calls.length, 2);
    });

    it('fails at once when the generation service refuses the request (4xx)', async () => {
      generation.status = 422;
      const id = await queue('refused-stage');
      await drain(renderer());
      const state = await job(id);
      assert.equal(state.status, 'failed');
      assert.equal(state.attempts, 1);
      assert.match(state.error, /422/);
    });

    it("fails at once, naming the mismatch, when the scene is outside the generation service's schema, and writes none of it", async () => {
      generation.reshape = (scene) => ({ ...scene, characters: 'Henri Desgrange' });
      const id = await queue('misshapen-stage');
      await drain(renderer());
      const state = await job(id);
      assert.equal(state.status, 'failed');
      assert.equal(state.attempts, 1);
      assert.match(state.error, /^the generation service answered outside its schema: characters: .*expected array/);
      const moment = await api.get(`/api/v1/moments/${path('misshapen-stage')}`, writer);
      assert.equal(moment.status, 200);
      assert.notEqual(moment.body.layer, 2);
    });

    it('reclaims a job left running by a crashed worker, and the crashed worker cannot complete it', async () => {
      const id = await queue('orphaned-stage');
      const [claimed] = await graph.repository.renderJobs.claim('crashed-worker', 1);
      assert.equal(claimed?.id, id);
      await drain(renderer({ staleMs: 60_000 }));
      assert.equal(generation.calls.length, 0, 'a recent claim is left alone');
      await database
        .knex('render_jobs')
        .where({ id })
        .update({ claimed_at: database.knex.raw(`now() - interval '2 minutes'`) });
      await drain(renderer({ staleMs: 60_000 }));
      const state = await job(id);
      assert.equal(state.status, 'succeeded');
      assert.equal(state.attempts, 2, 'the lost attempt counts');
      assert.equal(await graph.repository.renderJobs.complete(id, 'crashed-worker', randomUUID()), false);
    });

    it('releases the job it is rendering when stopped past its grace period', async () => {
      generation.delayMs = 1_000;
      const id = await queue('interrupted-stage');
      const worker = renderer();
      await worker.tick();
      await worker.stop(50);
      const state = await job(id);
      assert.equal(state.status, 'queued');
      assert.equal(state.attempts, 0);
    });

    it('stops paid calls once the daily budget is spent, shared by replicas', async () => {
      const ids = [await queue('paid-1'), await queue('paid-2'), await queue('paid-3')];
      // balanced with an image is estimated at $0.07: two fit in $0.15, the third does not.
      const worker = renderer({ concurrency: 1, budget: new SpendBudget(graph.repository.spend, 'renderer', 0.15) });
      for (let round = 0; round < 4; round += 1) await drain(worker);
      assert.equal(generation.calls.length, 2);
      const third = await database.knex('render_jobs').where({ id: ids[2] }).first('status', 'attempts', 'run_after');
      assert.equal(third.status, 'queued');
      assert.equal(third.attempts, 0);
      assert.equal(new Date(third.run_after).getTime(), nextUtcDay(new Date()).getTime());

      const replica = new SpendBudget(graph.repository.spend, 'renderer', 0.15);
      assert.ok(Math.abs((await replica.spentToday()) - 0.14) < 1e-9);
      await assert.rejects(replica.charge(0.07), BudgetExhausted);
      // Another role's budget is its own.
      await new SpendBudget(graph.repository.spend, 'judge', 0.15).charge(0.07);
    });
  });

  describe('judge (offline provider)', () => {
    it('publishes acceptable pending moments and archives and hides the rest', async () => {
      const good = path('pending-good', 1904);
      const spam = path('pending-spam', 1904);
      const reply = await api.post(
        '/ingest/tdf',
        [record(good, [], { status: 'pending' }), record(spam, [], { status: 'pending', description: 'Casino night: buy now!' })],
        writer,
      );
      assert.equal(reply.status, 200);
      assert.equal(await judgePending(graph, offline, new SpendBudget(graph.repository.spend, 'judge', 0), 10), 2);
      assert.equal((await api.get(`/api/v1/moments${good}`)).body.status, 'active');
      assert.equal((await api.get(`/api/v1/moments${spam}`)).status, 404, 'rejected moments leave public reads');
      const hidden = await api.get(`/api/v1/moments${spam}`, writer);
      assert.equal(hidden.body.status, 'archived');
      assert.equal(hidden.body.visibility, 'private');
      assert.equal(await judgePending(graph, offline, new SpendBudget(graph.repository.spend, 'judge', 0), 10), 0);
    });

    it('judges each moment once when replicas run at the same time', async () => {
      const paths = ['one', 'two', 'three', 'four'].map((slug) => path(`pending-race-${slug}`, 1905));
      assert.equal(
        (
          await api.post(
            '/ingest/tdf',
            paths.map((p) => record(p, [], { status: 'pending' })),
            writer,
          )
        ).status,
        200,
      );
      const { model, prompts } = countingModel(100);
      const budget = new SpendBudget(graph.repository.spend, 'judge', 0);
      const decided = await Promise.all([
        judgePending(graph, model, budget, 10),
        judgePending(graph, model, budget, 10),
        judgePending(graph, model, budget, 10),
      ]);
      assert.equal(
        decided.reduce((sum, n) => sum + n, 0),
        4,
      );
      assert.equal(prompts.length, 4, 'the model was asked about each moment once');
      for (const p of paths) assert.equal((await api.get(`/api/v1/moments${p}`)).body.status, 'active');
      const held = await database
        .knex('worker_claims as c')
        .join('moments as m', 'm.id', 'c.moment_id')
        .whereIn('m.path', paths)
        .andWhere('c.role', 'judge')
        .select('m.path');
      assert.equal(held.length, 4, 'each claim is kept until it lapses, so a replica that read the moment earlier cannot judge it again');
    });
  });

  describe('claims', () => {
    it('judges a moment again when a writer proposes it again, and never from an older read', async () => {
      const p = path('judge-again', 1830);
      const propose = async (event_name: string) =>
        assert.equal((await api.post('/ingest/tdf', { payload: { path: p, event_name, status: 'pending' } }, writer)).status, 200);
      const judge = () => judgePending(graph, offline, new SpendBudget(graph.repository.spend, 'judge', 0), 100);
      const state = async () => {
        const moment = (await api.get(`/api/v1/moments${p}`, writer)).body;
        return `${moment.status} ${moment.visibility}`;
      };
      await propose('A harmless proposal');
      await judge();
      assert.equal(await state(), 'active public');
      await propose('Buy now: casino bonus');
      await judge();
      assert.equal(await state(), 'archived private', 'the claim of the first verdict binds that version only');

      await propose('Proposed once more');
      const stale = (await graph.repository.claims.pendingMoments(100)).filter((row) => row.path === p);
      assert.equal(stale.length, 1);
      await propose('Proposed once more, reworded');
      assert.equal((await graph.repository.claims.claim('judge', stale, 60)).size, 0, 'a replica that read the older version gets no claim');
      await judge();
      assert.equal(await state(), 'active public');
    });
  });

  describe('expander (with a model)', () => {
    const paid = () => new SpendBudget(graph.repository.spend, 'expander', 10);
    const askedAbout = (prompts: string[]) => prompts.map((prompt) => (JSON.parse(prompt) as { path: string }).path);

    it('adds a consequence of an under-connected moment at layer 1 with a causes edge, and queues its render', async () => {
      const anchor = path('expander-anchor', 1805);
      assert.equal((await api.post('/ingest/tdf', record(anchor, [], { tags: ['cycling'] }), writer)).status, 200);
      const settings = { batch: 100, maxNew: 3, minEdges: 1 };
      const { model } = modelStandIn(0);
      const first = await expandUnderConnected(graph, model, paid(), settings);
      assert.ok(first.added >= 1);

      const added = path('consequence-of-expander-anchor', 1806);
      const moment = (await api.get(`/api/v1/moments${added}`, writer)).body;
      assert.equal(moment.layer, 1);
      assert.equal(moment.status, 'pending');
      assert.equal(moment.source_type, 'expander');
      const edgesOf = async () => (await api.get(`/api/v1/moments${anchor}`)).body.edges as Array<{ source: string; target: string; type: string }>;
      assert.ok(!(await edgesOf()).some((edge) => edge.target === added), 'the proposal is not shown beside its anchor before the judge passes it');
      await judgePending(graph, offline, new SpendBudget(graph.repository.spend, 'judge', 0), 100);
      assert.ok((await edgesOf()).some((edge) => edge.source === anchor && edge.target === added && edge.type === 'causes'));
      const jobs = await database
        .knex('render_jobs as j')
        .join('moments as m', 'm.id', 'j.moment_id')
        .where('m.path', added)
        .select('j.status', 'j.requested_by');
      assert.deepEqual(jobs, [{ status: 'queued', requested_by: 'expander' }]);

      const again = await expandUnderConnected(graph, model, paid(), settings);
      assert.equal(again.added, 0, 'an expanded moment is not expanded again');
    });

    it("describes a bare moment with the model's metadata, merged with its author's (layer 0 → 1, pending the Judge)", async () => {
      const bare = path('describe-with-a-model', 1900);
      const authored = {
        path: bare,
        event_name: 'Line 1 of the Paris Metro opens',
        layer: 0,
        figures: ['Ada Lovelace'],
        tags: ['paris'],
        latitude: 48.86,
        longitude: 2.34,
      };
      assert.equal((await api.post('/ingest/tdf', { payload: authored }, writer)).status, 200);
      const { model, prompts } = modelStandIn(0);
      assert.ok((await describeBare(graph, model, paid(), 100)) >= 1);
      assert.ok(askedAbout(prompts).includes(bare));

      const moment = (await api.get(`/api/v1/moments${bare}`, writer)).body;
      assert.deepEqual([moment.layer, moment.status, moment.type], [1, 'pending', 'construction']);
      assert.equal(moment.description, 'Line 1 of the Paris Metro opens, as the model tells it.');
      assert.deepEqual(moment.figures, ['Ada Lovelace', 'Fulgence Bienvenüe']);
      assert.deepEqual(moment.tags, ['paris', 'public-transport']);
      assert.deepEqual([moment.latitude, moment.longitude, moment.confidence], [48.86, 2.34, 0.8], "the author's place is kept");
      const jobs = await database
        .knex('render_jobs as j')
        .join('moments as m', 'm.id', 'j.moment_id')
        .where('m.path', bare)
        .select('j.requested_by', 'j.request');
      assert.deepEqual(
        jobs.map((job) => [job.requested_by, job.request.query]),
        [['expander', 'Line 1 of the Paris Metro opens: Line 1 of the Paris Metro opens, as the model tells it.']],
      );
    });

    it('links an anchor to its consequences without writing back its older read (a render finishing meanwhile keeps layer 2)', async () => {
      const anchor = path('expander-rendered-meanwhile', 1814);
      assert.equal((await api.post('/ingest/tdf', record(anchor, [], { source_type: 'generate' }), writer)).status, 200);
      const { model, prompts } = modelStandIn(300);
      const expanding = expandUnderConnected(graph, model, paid(), { batch: 100, maxNew: 1, minEdges: 1 });
      await waitFor('the model asked about the anchor', () => askedAbout(prompts).includes(anchor), { timeoutMs: 20_000, intervalMs: 10 });
      // The renderer's upgrade lands while the model is being asked about the anchor.
      assert.equal((await api.post('/ingest/tdf', record(anchor, [], { source_type: 'generate', layer: 2 }), writer)).status, 200);
      await expanding;
      const moment = (await api.get(`/api/v1/moments${anchor}`, writer)).body;
      assert.equal(moment.layer, 2);
      const added = path('consequence-of-expander-rendered-meanwhile', 1815);
      const edges = await database
        .knex('edges as e')
        .join('moments as s', 's.id', 'e.source_id')
        .join('moments as t', 't.id', 'e.target_id')
        .where('s.path', anchor)
        .select('t.path', 'e.type');
      assert.deepEqual(edges, [{ path: added, type: 'causes' }]);
    });

    it('expands each moment once when replicas run at the same time', async () => {
      const anchors = ['alpha', 'beta', 'gamma'].map((slug) => path(`expander-race-${slug}`, 1807));
      assert.equal(
        (
          await api.post(
            '/ingest/tdf',
            anchors.map((p) => record(p, [], { tags: ['racing'] })),
            writer,
          )
        ).status,
        200,
      );
      const { model, prompts } = modelStandIn(100);
      const budget = paid();
      const settings = { batch: 100, maxNew: 1, minEdges: 1 };
      const runs = await Promise.all([1, 2, 3].map(() => expandUnderConnected(graph, model, budget, settings)));
      const asked = askedAbout(prompts);
      for (const anchor of anchors) assert.equal(asked.filter((p) => p === anchor).length, 1, `${anchor} was asked about once`);
      assert.equal(new Set(asked).size, asked.length, 'no moment was asked about twice');
      assert.equal(
        runs.reduce((sum, run) => sum + run.expanded, 0),
        asked.length,
      );
    });
  });

  describe('expander (offline provider): nothing made up', () => {
    const free = () => new SpendBudget(graph.repository.spend, 'expander', 0);
    const LAYER_1 = ['event_name', 'description', 'type', 'figures', 'tags', 'latitude', 'longitude', 'confidence'] as const;
    const metadataOf = (moment: Record<string, unknown>) => Object.fromEntries(LAYER_1.map((field) => [field, moment[field]]));

    it('takes a bare moment to layer 1, pending the Judge, with only what its author wrote, and queues its render; archived, private and rendering ones are left alone', async () => {
      const bare = path('describe-me', 1810);
      const authored = path('describe-authored', 1810);
      const records = [
        { payload: { path: bare, event_name: 'A bare moment', layer: 0 } },
        {
          payload: {
            path: authored,
            event_name: 'An authored bare moment',
            layer: 0,
            description: 'Written by its author.',
            figures: ['Ada Lovelace'],
            tags: ['authored'],
            type: 'founding',
          },
        },
        { payload: { path: path('describe-archived', 1810), event_name: 'An archived bare moment', layer: 0, status: 'archived' } },
        { payload: { path: path('describe-private', 1810), event_name: 'A private bare moment', layer: 0, visibility: 'private' } },
      ];
      assert.equal((await api.post('/ingest/tdf', records, writer)).status, 200);
      const written = await Promise.all([bare, authored].map(async (p) => (await api.get(`/api/v1/moments${p}`, writer)).body));
      const rendering = 'describe-rendering';
      await queue(rendering);
      const { model, prompts } = countingModel(0);
      // Earlier tests' layer-0 moments whose jobs were cleared are bare too, and described with it.
      assert.ok((await describeBare(graph, model, free(), 100)) >= 2);
      assert.deepEqual(prompts, [], 'no model is asked');

      for (const [index, p] of [bare, authored].entries()) {
        const moment = (await api.get(`/api/v1/moments${p}`, writer)).body;
        assert.deepEqual([moment.layer, moment.status, moment.visibility], [1, 'pending', 'public']);
        assert.deepEqual(metadataOf(moment), metadataOf(written[index]), "nothing but its author's text");
        assert.equal((await api.get(`/api/v1/moments${p}`)).status, 404, 'unpublished until the Judge passes it');
      }
      const jobs = await database
        .knex('render_jobs as j')
        .join('moments as m', 'm.id', 'j.moment_id')
        .whereIn('m.path', [bare, authored])
        .orderBy('m.path')
        .select('m.path', 'j.status', 'j.requested_by', 'j.request');
      assert.deepEqual(
        jobs.map((job) => [job.path, job.status, job.requested_by, job.request.query]),
        [
          [authored, 'queued', 'expander', 'An authored bare moment: Written by its author.'],
          [bare, 'queued', 'expander', 'A bare moment'],
        ],
      );
      for (const slug of ['describe-archived', 'describe-private', rendering])
        assert.equal((await api.get(`/api/v1/moments${path(slug, slug === rendering ? 1903 : 1810)}`, writer)).body.layer, 0, slug);
      assert.equal(await describeBare(graph, model, free(), 100), 0, 'nothing is described twice');
    });

    it('proposes no moment, and leaves its anchors to be expanded once a model is configured', async () => {
      const anchors = [path('offline-anchor-written', 1816), path('offline-anchor-ingested', 1817)];
      const records = [record(anchors[0]!, [], { source_type: 'generate' }), record(anchors[1]!, [])];
      assert.equal((await api.post('/ingest/tdf', records, writer)).status, 200);
      const proposals = () => database.knex('moments').where('source_type', 'expander').count({ n: '*' }).first();
      const before = await proposals();
      const { model, prompts } = countingModel(0);
      assert.deepEqual(await expandUnderConnected(graph, model, free(), { batch: 100, maxNew: 3, minEdges: 1 }), { expanded: 0, added: 0 });
      assert.deepEqual(prompts, [], 'no model is asked');
      assert.deepEqual(await proposals(), before, 'no moment is made up');
      assert.deepEqual(await database.knex('moments').whereIn('path', anchors).whereNotNull('expanded_at').select('path'), [], 'no anchor is marked expanded');

      const configured = modelStandIn(0);
      await expandUnderConnected(graph, configured.model, new SpendBudget(graph.repository.spend, 'expander', 10), { batch: 100, maxNew: 1, minEdges: 1 });
      const asked = configured.prompts.map((prompt) => (JSON.parse(prompt) as { path: string }).path);
      for (const anchor of anchors) assert.ok(asked.includes(anchor), anchor);
    });
  });

  describe('daily', () => {
    const run = promisify(execFile);
    const workerEntry = fileURLToPath(new URL('../src/worker.ts', import.meta.url));

    it('adds the curated real events of today in past years once per date (the CronJob entry, offline)', async () => {
      const env = { ...process.env, DATABASE_URL: api.databaseUrl, LOG_LEVEL: 'silent', DAILY_MOMENTS: '3', WORKER_ROLE: 'daily' };
      await run(process.execPath, [workerEntry, 'daily'], { env });
      const now = new Date();
      const curated = readDailyEvents()
        .get(`${now.getUTCMonth() + 1}-${now.getUTCDate()}`)!
        .slice(0, 3);
      const today = () =>
        database
          .knex('moments')
          .where({ source_type: 'daily', month_num: now.getUTCMonth() + 1, day: now.getUTCDate() })
          .select('event_name', 'city', 'layer', 'status', 'year');
      const added = await today();
      assert.deepEqual(added.map((moment) => moment.event_name).sort(), curated.map((event) => event.event_name).sort());
      for (const moment of added) {
        assert.equal(moment.layer, 1);
        assert.equal(moment.status, 'pending');
        assert.ok(moment.year < now.getUTCFullYear());
        assert.notEqual(moment.city, 'unknown');
      }
      await run(process.execPath, [workerEntry, 'daily'], { env });
      assert.equal((await today()).length, curated.length, 'a second run the same day adds nothing');
    });

    it('with a model, a failed call writes nothing and leaves the date to run again', async () => {
      let reply: () => string = () => {
        throw new Error('provider unavailable (503)');
      };
      const flaky: TextProvider = {
        kind: 'aggregator',
        async generateText(request: TextRequest) {
          return {
            text: reply(),
            provider: 'aggregator',
            model: request.model,
            usage: { input_tokens: 10, output_tokens: 10, thinking_tokens: 0, total_tokens: 20 },
          };
        },
      };
      const model = { provider: flaky, model: 'test/model' };
      const budget = new SpendBudget(graph.repository.spend, 'daily', 1);
      const date = new Date(Date.UTC(2024, 3, 11, 6));
      const written = () => database.knex('moments').where({ source_type: 'daily', month_num: 4, day: 11 }).select('event_name', 'country');
      await assert.rejects(runDaily(graph, model, budget, 2, date), /provider unavailable/);
      reply = () => 'Sorry, I cannot help with that.';
      await assert.rejects(runDaily(graph, model, budget, 2, date), ModelReplyError);
      reply = () => JSON.stringify({ moments: [{ event_name: 'Not a moment', year: 'long ago' }] });
      await assert.rejects(runDaily(graph, model, budget, 2, date), ModelReplyError);
      assert.deepEqual(await written(), [], 'no placeholder stands in for the failed reply');
      assert.equal(await graph.repository.meta.get(dailyKey('2024-04-11')), undefined, 'the date is not recorded as done');

      reply = () =>
        JSON.stringify({
          moments: [
            {
              event_name: 'Treaty of Fontainebleau signed',
              year: 1814,
              month: 4,
              day: 11,
              country: 'France',
              region: 'Ile-de-France',
              city: 'Fontainebleau',
              type: 'treaty',
            },
          ],
        });
      assert.equal((await runDaily(graph, model, budget, 2, date)).length, 1);
      assert.deepEqual(await written(), [{ event_name: 'Treaty of Fontainebleau signed', country: 'france' }]);
    });

    it('asks the model nothing on a date already done, whatever the model would say', async () => {
      let calls = 0;
      const varying: TextProvider = {
        kind: 'aggregator',
        async generateText(request: TextRequest) {
          calls += 1;
          const text = JSON.stringify({
            moments: [
              { event_name: `Varying event ${calls}`, year: 1700 + calls, month: 3, day: 9, country: 'Italy', region: 'Lazio', city: 'Rome', type: 'event' },
            ],
          });
          return {
            text,
            provider: 'aggregator',
            model: request.model,
            usage: { input_tokens: 100, output_tokens: 100, thinking_tokens: 0, total_tokens: 200 },
          };
        },
      };
      const budget = new SpendBudget(graph.repository.spend, 'daily', 1);
      const date = new Date(Date.UTC(2024, 2, 9, 4));
      const first = await runDaily(graph, { provider: varying, model: 'test/model' }, budget, 1, date);
      assert.deepEqual(first, [`/1701/${MONTHS[2]}/9/1200/italy/lazio/rome/varying-event-1`]);
      assert.deepEqual(await runDaily(graph, { provider: varying, model: 'test/model' }, budget, 1, date), []);
      assert.equal(calls, 1);
      // The paid call was reserved at its ceiling and settled at the tokens reported: 100 in, 100 out.
      assert.ok(Math.abs((await budget.spentToday()) - (100 * 0.3 + 100 * 2.5) / 1e6) < 1e-9);
    });
  });
});
