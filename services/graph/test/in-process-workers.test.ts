import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { ConfigError, loadConfig } from '@tempora/kit/runtime';
import pg from 'pg';
import { createDatabase, dropDatabase } from '../../../test/support/database.ts';
import { FakeGeneration } from '../../../test/support/stand-ins/generation.ts';
import { waitFor } from '../../../test/support/wait.ts';
import { scrape } from '../../kit/test/metrics-support.ts';
import { GraphConfigSchema } from '../src/config.ts';
import { readDailyEvents } from '../src/workers/daily.ts';
import { type GraphHarness, SERVICE_KEY, serviceKey, startGraph, writer } from './harness.ts';

const path = (slug: string) => `/1903/july/1/1516/france/ile-de-france/montgeron/${slug}`;

/** The job once it has left queued/running. */
function settled(api: GraphHarness, id: string, timeoutMs = 15_000): Promise<Record<string, any>> {
  return waitFor(
    `job ${id} to leave queued/running`,
    async () => {
      const job = (await api.get(`/api/v1/graph/jobs/${id}`, writer)).body;
      return !['queued', 'running'].includes(job.status) && (job as Record<string, any>);
    },
    { timeoutMs },
  );
}

async function queue(api: GraphHarness, slug: string): Promise<string> {
  const reply = await api.post('/api/v1/graph/generate', { path: path(slug), event_name: `The ${slug.replace(/-/g, ' ')}` }, writer);
  assert.equal(reply.status, 202);
  return reply.body.job.id as string;
}

describe('graph service: in-process workers (GRAPH_WORKERS)', function () {
  this.timeout(60_000);
  const generation = new FakeGeneration();
  before(() => generation.start());
  after(() => generation.stop());
  beforeEach(() => {
    generation.status = 200;
    generation.delayMs = 0;
    generation.calls.length = 0;
  });

  describe('configuration', () => {
    const base = { WRITER_TOKENS: 'tester:writer-token-0123456789' };
    const roles = (env: Record<string, string>) => loadConfig(GraphConfigSchema, { ...base, ...env }).GRAPH_WORKERS;
    it('defaults to every role on the embedded database and none with PostgreSQL', () => {
      assert.deepEqual(roles({}), ['renderer', 'expander', 'judge', 'daily']);
      assert.deepEqual(roles({ DATABASE_URL: '' }), ['renderer', 'expander', 'judge', 'daily']);
      assert.deepEqual(roles({ DATABASE_URL: 'postgres://db/graph' }), []);
      assert.deepEqual(roles({ DATABASE_URL: 'postgres://db/graph', GRAPH_WORKERS: 'renderer, daily' }), ['renderer', 'daily']);
      assert.deepEqual(roles({ GRAPH_WORKERS: 'none' }), []);
    });

    it('validates the switch and the variables it shares with the worker', () => {
      assert.throws(
        () => roles({ GRAPH_WORKERS: 'renderer,worker' }),
        (error: Error) => error instanceof ConfigError && /GRAPH_WORKERS: unknown roles worker/.test(error.message),
      );
      assert.throws(() => roles({ EXPANDER_BATCH: '0' }), /EXPANDER_BATCH/);
      assert.throws(
        () => loadConfig(GraphConfigSchema, { ...base, RENDER_TIMEOUT_MS: '1000', RENDER_STALE_MS: '1000' }),
        /RENDER_STALE_MS: must exceed RENDER_TIMEOUT_MS/,
      );
      assert.throws(() => loadConfig(GraphConfigSchema, { ...base, WORKER_CONCURRENCY: '0' }), /WORKER_CONCURRENCY/);
      const config = loadConfig(GraphConfigSchema, { ...base, WORKER_CONCURRENCY: '4', RENDER_MAX_ATTEMPTS: '2', GENERATION_SERVICE_KEY: 'gen-key' });
      assert.equal(config.WORKER_CONCURRENCY, 4);
      assert.equal(config.RENDER_MAX_ATTEMPTS, 2);
      assert.equal(config.GENERATION_SERVICE_KEY, 'gen-key');
    });
  });

  const inProcess = () => ({ GRAPH_WORKERS: 'renderer', GENERATION_URL: generation.url, WORKER_POLL_MS: '50', RENDER_BACKOFF_MS: '1' });

  describe('on PostgreSQL, the renderer switched on', () => {
    let api: GraphHarness;
    before(async () => {
      api = await startGraph(inProcess());
    });
    after(() => api?.stop());

    it('renders a job queued through POST /generate: the job succeeds and the moment reaches layer 2', async () => {
      const id = await queue(api, 'first-tour-de-france');
      const job = await settled(api, id);
      assert.equal(job.status, 'succeeded', JSON.stringify(job));
      assert.equal(job.attempts, 1);
      assert.match(job.scene_id, /^[0-9a-f-]{36}$/);
      assert.equal(generation.calls.length, 1);
      assert.equal(generation.calls[0]!.serviceKey, SERVICE_KEY);
      assert.deepEqual(generation.calls[0]!.body.request_context, { graph_render_job: id, path: path('first-tour-de-france') });

      const moment = (await api.get(`/api/v1/moments${path('first-tour-de-france')}`)).body;
      assert.equal(moment.layer, 2);
      assert.equal(moment.image_url, `${generation.url}/api/v1/timepoints/${job.scene_id}/image`);
      assert.deepEqual(moment.figures, ['Henri Desgrange']);
      // The renderer shares this process's GraphService: the in-memory node store has the new layer at once.
      const traversal = await api.get(`/api/v1/graph/traverse${path('first-tour-de-france')}?depth=1`, serviceKey);
      assert.equal(traversal.body.nodes[0].layer, 2);
      assert.match(
        await scrape(api.server),
        /graph_worker_jobs_total\{[^}]*role="renderer"[^}]*outcome="rendered"[^}]*\} 1/,
        "the service's /metrics counts its renders",
      );
    });

    it('fails a job the generation service refuses, with its error', async () => {
      generation.status = 422;
      const id = await queue(api, 'refused-stage');
      const job = await settled(api, id);
      assert.equal(job.status, 'failed');
      assert.match(job.error, /422/);
    });
  });

  it('is off by default with PostgreSQL: jobs wait for the GraphWorker renderer', async () => {
    const api = await startGraph({ GENERATION_URL: generation.url, WORKER_POLL_MS: '50' });
    try {
      assert.equal(api.instance.workers.size, 0);
      const id = await queue(api, 'waiting-stage');
      await sleep(300);
      assert.equal((await api.get(`/api/v1/graph/jobs/${id}`, writer)).body.status, 'queued');
      assert.equal(generation.calls.length, 0);
    } finally {
      await api.stop();
    }
  });

  it('stops with the service: a render in flight past SHUTDOWN_GRACE_MS goes back to the queue', async () => {
    const databaseUrl = await createDatabase('graph');
    try {
      const api = await startGraph({ ...inProcess(), SHUTDOWN_GRACE_MS: '100' }, databaseUrl);
      generation.delayMs = 2_000;
      const id = await queue(api, 'interrupted-stage');
      await waitFor('the render to start', () => generation.calls.length > 0, { intervalMs: 20 });
      assert.equal(generation.calls.length, 1, 'the render started');
      const started = Date.now();
      await api.stop();
      assert.ok(Date.now() - started < 1_500, 'the shutdown did not wait for the render');
      const client = new pg.Client({ connectionString: databaseUrl });
      await client.connect();
      try {
        const { rows } = await client.query('select status, attempts, claimed_by from render_jobs where id = $1', [id]);
        assert.deepEqual(rows, [{ status: 'queued', attempts: 0, claimed_by: null }]);
      } finally {
        await client.end();
      }
    } finally {
      await dropDatabase(databaseUrl);
    }
  });

  it('offline, publishes nothing the workers made up: no placeholder and no invented moment in any public read, and a bare moment still reaches layer 2', async () => {
    const databaseUrl = await createDatabase('graph');
    try {
      const api = await startGraph({ ...inProcess(), GRAPH_WORKERS: 'renderer,expander,judge,daily', DAILY_MOMENTS: '2' }, databaseUrl);
      try {
        // A user's bare moment (a path and a name) and a user's full moment with no edges: what the
        // Expander describes, and what it would expand around.
        const bare = path('offline-bare-moment');
        const written = '/1903/july/2/1200/france/ile-de-france/paris/offline-written-moment';
        const records = [
          { payload: { path: bare, event_name: 'An offline bare moment', layer: 0 } },
          {
            payload: {
              path: written,
              event_name: 'An offline written moment',
              layer: 1,
              description: 'Written by a person.',
              figures: ['Ada Lovelace'],
              tags: ['offline'],
            },
          },
        ];
        assert.equal((await api.post('/ingest/tdf', records, writer)).status, 200);
        const layers: number[] = [];
        const moment = await waitFor(
          'the moment at layer 2',
          async () => {
            const seen = (await api.get(`/api/v1/moments${bare}`, writer)).body;
            if (layers.at(-1) !== seen.layer) layers.push(seen.layer);
            return seen.layer >= 2 && seen;
          },
          { timeoutMs: 20_000, intervalMs: 10 },
        ).catch((error: Error) => assert.fail(`${error.message}: ${layers.join(' → ')}`));
        assert.deepEqual([moment.layer, moment.status], [2, 'active'], layers.join(' → '));
        // Every worker polls again a few times after the moment's last step: "invents nothing later" has no
        // event to wait on, so a window of several polls is the test.
        await sleep(500);

        const invented = /placeholder|aftermath of/i;
        const reads = [
          '/api/v1/moments?limit=100',
          '/api/v1/moments?q=placeholder',
          '/api/v1/moments?q=aftermath',
          '/search?q=offline',
          '/today?month=july&day=1',
          '/today?month=july&day=2',
          '/today',
          `/api/v1/moments${bare}`,
          `/api/v1/moments${written}`,
          `/api/v1/graph/traverse${bare}?direction=both&depth=3`,
          `/api/v1/graph/traverse${written}?direction=both&depth=3`,
        ];
        for (const read of reads) {
          // Beyond the moments, reads answer service-key callers only (the gateway's, for anyone); they show what is published.
          const reply = await api.get(read, read.startsWith('/api/v1/moments') ? {} : serviceKey);
          assert.equal(reply.status, 200, read);
          assert.doesNotMatch(JSON.stringify(reply.body), invented, read);
        }
        const list = (await api.get('/api/v1/moments?limit=100')).body;
        assert.ok(list.total <= 100, 'the list is read whole');
        assert.deepEqual(
          list.items.filter((item: { source_type: string }) => item.source_type === 'expander'),
          [],
          'the Expander proposed nothing',
        );
        assert.ok(list.items.some((item: { path: string }) => item.path === bare));
        // The author wrote no description; the scene's summary is the only one it has.
        assert.equal(moment.description, 'Sixty cyclists set off on a 2,428 km race around France.');
        // Nor does anything made up wait unpublished, to be passed later.
        const client = new pg.Client({ connectionString: databaseUrl });
        await client.connect();
        try {
          const { rows } = await client.query("select path from moments where source_type = 'expander' or event_name ~* $1 or description ~* $1", [
            invented.source,
          ]);
          assert.deepEqual(rows, []);
        } finally {
          await client.end();
        }
      } finally {
        await api.stop();
      }
    } finally {
      await dropDatabase(databaseUrl);
    }
  });

  it('runs the whole lifecycle on the embedded database, the default of `npm start`: layer 0 → 1 (the Expander) → Judge → 2 (the Renderer), and Daily', async () => {
    const dataDir = await mkdtemp(join(tmpdir(), 'tempora-graph-'));
    try {
      const { GRAPH_WORKERS: _, ...env } = inProcess();
      const api = await startGraph({ ...env, DATABASE_URL: '', TEMPORA_DATA_DIR: dataDir, DAILY_MOMENTS: '2' });
      try {
        assert.deepEqual([...api.instance.workers.keys()], ['renderer', 'expander', 'judge', 'daily'], 'every role, by default without DATABASE_URL');

        // Layer 0: a path and a name, as a writer records it; then every state the moment passes through.
        const bare = path('embedded-lifecycle');
        const states: string[] = [];
        const watch = async () => {
          const moment = (await api.get(`/api/v1/moments${bare}`, writer)).body;
          const state = `${moment.layer} ${moment.status}${moment.image_url ? ' image' : ''}`;
          if (states.at(-1) !== state) states.push(state);
          return moment;
        };
        const ingested = await api.post('/ingest/tdf', { payload: { path: bare, event_name: 'An embedded lifecycle', layer: 0 } }, writer);
        assert.equal(ingested.status, 200, JSON.stringify(ingested.body));
        const moment = await waitFor(
          'the moment at layer 2',
          async () => {
            const seen = await watch();
            return seen.layer >= 2 && seen;
          },
          { timeoutMs: 20_000, intervalMs: 5 },
        ).catch((error: Error) => assert.fail(`${error.message}: ${states.join(' → ')}`));
        // The workers poll every 50 ms here, so a state may pass between two reads; those seen are in order.
        const lifecycle = ['0 active', '1 pending', '1 active', '2 active image'];
        assert.deepEqual(
          states,
          lifecycle.filter((state) => states.includes(state)),
          states.join(' → '),
        );
        assert.equal(states.at(-1), '2 active image', states.join(' → '));
        // Offline the Expander adds nothing to what the author wrote (no description): the scene's summary fills it.
        assert.equal(moment.description, 'Sixty cyclists set off on a 2,428 km race around France.', "the Renderer's description (layer 2)");
        const renders = generation.calls
          .map((call) => call.body.request_context as { graph_render_job: string; path: string })
          .filter((context) => context.path === bare);
        assert.equal(renders.length, 1, 'rendered once');
        // The Expander's job is the service's own: a writer does not see it, the service key does.
        assert.equal((await api.get(`/api/v1/graph/jobs/${renders[0]!.graph_render_job}`, writer)).status, 404);
        const job = (await api.get(`/api/v1/graph/jobs/${renders[0]!.graph_render_job}`, serviceKey)).body;
        assert.deepEqual([job.path, job.requested_by, job.status, job.attempts], [bare, 'expander', 'succeeded', 1], 'the Expander queued its render');
        const verdicts = await scrape(api.server);
        assert.match(verdicts, /graph_worker_judge_verdicts_total\{[^}]*verdict="publish"[^}]*\} [1-9]/, 'the Judge passed it');

        // The Judge rejects what the offline moderator refuses: archived, private, and never rendered.
        const spam = path('buy-now-casino');
        assert.equal((await api.post('/ingest/tdf', { payload: { path: spam, event_name: 'Buy now at the casino', layer: 0 } }, writer)).status, 200);
        const rejected = await waitFor(
          'the spam archived',
          async () => {
            const seen = (await api.get(`/api/v1/moments${spam}`, writer)).body;
            return seen.status === 'archived' && seen;
          },
          { timeoutMs: 20_000, intervalMs: 20 },
        );
        assert.deepEqual([rejected.status, rejected.visibility, rejected.layer], ['archived', 'private', 1]);
        assert.equal((await api.get(`/api/v1/moments${spam}`)).status, 404);

        // Daily ran at start: today's moments, passed by the Judge, in today's public list.
        const now = new Date();
        const today = `/today?month=${now.getUTCMonth() + 1}&day=${now.getUTCDate()}`;
        // DAILY_MOMENTS=2, of the curated events of the day (one or more).
        const expected = Math.min(2, readDailyEvents().get(`${now.getUTCMonth() + 1}-${now.getUTCDate()}`)!.length);
        const entries = await waitFor(
          `${expected} Daily moments`,
          async () => {
            const daily: Array<{ source_type: string; status: string }> = (await api.get(today, serviceKey)).body.items.filter(
              (item: { source_type: string }) => item.source_type === 'daily',
            );
            return daily.length >= expected && daily;
          },
          { timeoutMs: 20_000 },
        );
        assert.equal(entries.length, expected);
        assert.ok(entries.every((entry) => entry.status === 'active'));

        const metrics = await scrape(api.server);
        for (const role of ['expander', 'judge'])
          assert.match(metrics, new RegExp(`graph_worker_runs_total\\{[^}]*role="${role}"[^}]*outcome="worked"[^}]*\\} [1-9]`), role);
        assert.match(metrics, /graph_worker_judge_verdicts_total\{[^}]*verdict="reject"[^}]*\} 1/);
      } finally {
        await api.stop();
      }
    } finally {
      await rm(dataDir, { recursive: true, force: true });
    }
  });
});
