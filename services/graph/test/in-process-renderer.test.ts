import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { loadConfig, ConfigError } from '@tempora/kit/runtime';
import { GraphConfigSchema } from '../src/config.ts';
import { createDatabase, dropDatabase } from '../../../test/support/database.ts';
import { FakeGeneration } from './fake-generation.ts';
import { startGraph, serviceKey, writer, SERVICE_KEY, type GraphHarness } from './harness.ts';

const path = (slug: string) => `/1903/july/1/1516/france/ile-de-france/montgeron/${slug}`;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Polls the job until it leaves queued/running (or the deadline passes); its last state. */
async function settled(api: GraphHarness, id: string, timeoutMs = 15_000): Promise<Record<string, any>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const job = (await api.get(`/api/v1/graph/jobs/${id}`, writer)).body;
    if (!['queued', 'running'].includes(job.status) || Date.now() > deadline) return job;
    await sleep(50);
  }
}

async function queue(api: GraphHarness, slug: string): Promise<string> {
  const reply = await api.post('/api/v1/graph/generate', { path: path(slug), event_name: `The ${slug.replace(/-/g, ' ')}` }, writer);
  assert.equal(reply.status, 202);
  return reply.body.job.id as string;
}

describe('graph service: in-process renderer (GRAPH_RENDERER)', function () {
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
    it('defaults to in-process on the embedded database and off with PostgreSQL', () => {
      assert.equal(loadConfig(GraphConfigSchema, base).GRAPH_RENDERER, 'in-process');
      assert.equal(loadConfig(GraphConfigSchema, { ...base, DATABASE_URL: '' }).GRAPH_RENDERER, 'in-process');
      assert.equal(loadConfig(GraphConfigSchema, { ...base, DATABASE_URL: 'postgres://db/graph' }).GRAPH_RENDERER, 'off');
      assert.equal(loadConfig(GraphConfigSchema, { ...base, DATABASE_URL: 'postgres://db/graph', GRAPH_RENDERER: 'in-process' }).GRAPH_RENDERER, 'in-process');
      assert.equal(loadConfig(GraphConfigSchema, { ...base, GRAPH_RENDERER: 'off' }).GRAPH_RENDERER, 'off');
    });

    it('validates the switch and the renderer variables it shares with the worker', () => {
      assert.throws(() => loadConfig(GraphConfigSchema, { ...base, GRAPH_RENDERER: 'worker' }), (error: Error) => error instanceof ConfigError && /GRAPH_RENDERER/.test(error.message));
      assert.throws(() => loadConfig(GraphConfigSchema, { ...base, RENDER_TIMEOUT_MS: '1000', RENDER_STALE_MS: '1000' }), /RENDER_STALE_MS: must exceed RENDER_TIMEOUT_MS/);
      assert.throws(() => loadConfig(GraphConfigSchema, { ...base, WORKER_CONCURRENCY: '0' }), /WORKER_CONCURRENCY/);
      const config = loadConfig(GraphConfigSchema, { ...base, WORKER_CONCURRENCY: '4', RENDER_MAX_ATTEMPTS: '2', GENERATION_SERVICE_KEY: 'gen-key' });
      assert.equal(config.WORKER_CONCURRENCY, 4);
      assert.equal(config.RENDER_MAX_ATTEMPTS, 2);
      assert.equal(config.GENERATION_SERVICE_KEY, 'gen-key');
    });
  });

  const inProcess = () => ({ GRAPH_RENDERER: 'in-process', GENERATION_URL: generation.url, WORKER_POLL_MS: '50', RENDER_BACKOFF_MS: '1' });

  describe('on PostgreSQL, switched on', () => {
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
      const metrics = await api.get('/metrics');
      assert.match(String(metrics.body), /graph_worker_jobs_total\{[^}]*role="renderer"[^}]*outcome="rendered"[^}]*\} 1/, 'the service\'s /metrics counts its renders');
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
      assert.equal(api.instance.renderer, undefined);
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
      const deadline = Date.now() + 10_000;
      while (generation.calls.length === 0 && Date.now() < deadline) await sleep(20);
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

  it('renders on the embedded database, the default of `npm start`', async () => {
    const dataDir = await mkdtemp(join(tmpdir(), 'tempora-graph-'));
    try {
      const { GRAPH_RENDERER: _, ...env } = inProcess();
      const api = await startGraph({ ...env, DATABASE_URL: '', TEMPORA_DATA_DIR: dataDir });
      try {
        assert.ok(api.instance.renderer, 'switched on by default without DATABASE_URL');
        const id = await queue(api, 'embedded-stage');
        const job = await settled(api, id);
        assert.equal(job.status, 'succeeded', JSON.stringify(job));
        assert.equal((await api.get(`/api/v1/moments${path('embedded-stage')}`)).body.layer, 2);
      } finally {
        await api.stop();
      }
    } finally {
      await rm(dataDir, { recursive: true, force: true });
    }
  });
});
