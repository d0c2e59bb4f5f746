import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { scrape } from '../../kit/test/metrics-support.ts';
import { EVENT_ORDER } from '../src/agents/types.ts';
import { fakeVendorSuite, type GenerationHarness, QUERY, readSse, startGeneration, user, userId, vendorEnv } from './harness.ts';

describe('generation: pipeline over the native provider', function () {
  this.timeout(30_000);
  const { fake, gen } = fakeVendorSuite({ AGENT_REPAIR_ATTEMPTS: '2' });

  it('renders a full scene through all 14 agents on the native provider, with grounding citations and tokens', async () => {
    const reply = await gen.post('/api/v1/timepoints/generate/sync', { query: QUERY, generate_image: true, request_context: { trace: 'abc' } }, user('alice'));
    assert.equal(reply.status, 200, JSON.stringify(reply.body));
    const scene = reply.body;
    assert.equal(scene.title, 'The Eagle Has Landed');
    assert.equal(scene.year, 1969);
    assert.equal(scene.time, '2017');
    assert.equal(scene.path, '1969/july/20/2017/united-states/texas/houston/apollo-11-lands-on-the-moon');
    assert.deepEqual(
      scene.characters.map((c: any) => c.name),
      ['Charlie Duke', 'Gene Kranz'],
    );
    assert.equal(scene.characters[1].bio, 'Astronaut, CAPCOM for the landing.');
    assert.equal(scene.relationships[0].type, 'supervises');
    assert.equal(scene.dialog.length, 3);
    assert.equal(scene.model_provider, 'native');
    assert.equal(scene.models.text.model, 'gemini-2.5-flash');
    assert.equal(scene.models.image.model, 'gemini-2.5-flash-image');
    assert.match(scene.image_url, /\/api\/v1\/timepoints\/[0-9a-f-]+\/image$/);
    assert.deepEqual(scene.request_context, { trace: 'abc' });
    assert.equal(scene.owner, userId('alice'));
    assert.deepEqual(scene.sources.map((s: any) => s.url).sort(), ['https://en.wikipedia.org/wiki/Apollo_11', 'https://www.nasa.gov/mission/apollo-11/']);
    assert.ok(scene.confidence.overall > 0.7 && scene.confidence.overall <= 1);
    assert.ok(scene.tokens.total > 0 && scene.tokens.thinking > 0);
    const agents = new Set(fake.of('native').map((call) => call.agent));
    for (const name of [
      'Judge',
      'Timeline',
      'Grounding',
      'Scene',
      'Characters',
      'CharacterBio',
      'Graph',
      'Moment',
      'Camera',
      'Dialog',
      'Critique',
      'ImagePrompt',
      'Optimizer',
      'ImageGen',
    ])
      assert.ok(agents.has(name), `${name} was called`);
    assert.equal(fake.of('native', 'CharacterBio').length, 2, 'one bio per character');
    assert.deepEqual(Object.keys(scene.timings.agents).sort(), [...EVENT_ORDER, 'CharacterBio', 'Graph'].sort());
    const image = await fetch(`${gen.url}/api/v1/timepoints/${scene.id}/image`);
    assert.equal(image.headers.get('content-type'), 'image/png');
  });

  it('runs independent agents concurrently (bios in parallel, Moment beside Camera, ImagePrompt beside Dialog)', async () => {
    fake.latencyMs = 120;
    const reply = await gen.post('/api/v1/timepoints/generate/sync', { query: QUERY });
    assert.equal(reply.status, 200);
    const steps = reply.body.timings.steps as Array<{ agent: string; started_ms: number; duration_ms: number }>;
    const at = (agent: string, index = 0) => steps.filter((step) => step.agent === agent)[index]!;
    const overlap = (a: { started_ms: number; duration_ms: number }, b: { started_ms: number; duration_ms: number }) =>
      a.started_ms < b.started_ms + b.duration_ms && b.started_ms < a.started_ms + a.duration_ms;
    assert.ok(overlap(at('Moment'), at('Camera')), 'Moment beside Camera');
    assert.ok(overlap(at('CharacterBio', 0), at('CharacterBio', 1)), 'bios in parallel');
    assert.ok(overlap(at('Grounding'), at('Scene')), 'Grounding beside Scene');
    // Critical path: Judge, Timeline, Scene, Characters, Bio, Graph, Dialog, Critique = 8 calls.
    // 13 calls run one after another would take 1560 ms; the graph needs about 8 × 120 = 960 ms (plus overhead).
    assert.ok(reply.body.timings.total_ms < 120 * 11.5, `total ${reply.body.timings.total_ms} ms is close to the critical path`);
  });

  it('streams one event per agent in the spec order with timing and model, heartbeats, then done with the scene id', async () => {
    fake.latencyMs = 40;
    const gen2 = await startGeneration({ ...vendorEnv(fake), STREAM_HEARTBEAT_MS: '50' });
    try {
      const response = await fetch(`${gen2.url}/api/v1/timepoints/generate/stream`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ query: QUERY, generate_image: true }),
      });
      assert.equal(response.status, 200);
      assert.match(response.headers.get('content-type')!, /text\/event-stream/);
      const events = await readSse(response);
      const agents = events.filter((event) => event.event === 'agent');
      assert.deepEqual(
        agents.map((event) => event.data.agent),
        EVENT_ORDER,
      );
      for (const event of agents) {
        assert.equal(event.data.status, 'completed', event.data.agent);
        assert.ok(event.data.duration_ms >= 30, `${event.data.agent} duration`);
        assert.equal(event.data.provider, 'native');
        assert.ok(event.data.model);
      }
      assert.equal(events[0]!.event, 'start');
      assert.ok(
        events.some((event) => event.event === 'comment'),
        'heartbeats',
      );
      const done = events.at(-1)!;
      assert.equal(done.event, 'done');
      const stored = await gen2.get(`/api/v1/timepoints/${done.data.timepoint_id}`);
      assert.equal(stored.status, 200);
      assert.equal(stored.body.title, 'The Eagle Has Landed');
    } finally {
      await gen2.stop();
    }
  });

  it('cancels the remaining agents when the stream client disconnects', async () => {
    fake.latencyMs = 300;
    const controller = new AbortController();
    const response = await fetch(`${gen.url}/api/v1/timepoints/generate/stream`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ query: QUERY }),
      signal: controller.signal,
    });
    await readSse(response, (event) => event.event === 'agent' && event.data.agent === 'Timeline').catch(() => []);
    controller.abort();
    await sleep(800);
    const seen = fake.requests.length;
    await sleep(600);
    assert.equal(fake.requests.length, seen, 'no agent call starts after the disconnect');
    assert.ok(!fake.requests.some((call) => call.agent === 'Dialog'), 'Dialog never ran');
  });

  it('cancels a sync generation when its client disconnects', async () => {
    fake.latencyMs = 300;
    const controller = new AbortController();
    const pending = fetch(`${gen.url}/api/v1/timepoints/generate/sync`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ query: QUERY }),
      signal: controller.signal,
    }).catch(() => undefined);
    await sleep(400);
    controller.abort();
    await pending;
    await sleep(800);
    const seen = fake.requests.length;
    await sleep(600);
    assert.equal(fake.requests.length, seen, 'no agent call starts after the disconnect');
    assert.ok(!fake.requests.some((call) => call.agent === 'Dialog'));
  });

  it('rejects an invalid query through the Judge with 422', async () => {
    fake.fail('native', 'Judge', {
      kind: 'output',
      value: { valid: false, reason: 'This is not a historical moment.', query_type: 'invalid', normalized_query: 'buy shoes' },
    });
    const reply = await gen.post('/api/v1/timepoints/generate/sync', { query: 'buy me some shoes' });
    assert.equal(reply.status, 422);
    assert.equal(reply.body.title, 'Query rejected');
    assert.deepEqual(reply.body.errors, [{ path: 'body.query', message: 'This is not a historical moment.' }]);
    assert.equal(fake.of('native', 'Timeline').length, 0);
    fake.fail('native', 'Judge', { kind: 'output', value: { valid: false, reason: 'Not history.', query_type: 'invalid', normalized_query: 'x' } });
    const response = await fetch(`${gen.url}/api/v1/timepoints/generate/stream`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ query: 'buy me some shoes' }),
    });
    const events = await readSse(response);
    assert.deepEqual(
      events.filter((event) => event.event !== 'comment').map((event) => event.event),
      ['start', 'error'],
    );
    assert.equal(events.at(-1)!.data.status, 422);
  });

  it('repairs malformed model output within the budget', async () => {
    fake.fail(
      'native',
      'Scene',
      { kind: 'invalid-output', text: 'Sure! Here is the scene: {"title": ' },
      { kind: 'invalid-output', text: '{"title": "", "setting": 5}' },
    );
    const reply = await gen.post('/api/v1/timepoints/generate/sync', { query: QUERY });
    assert.equal(reply.status, 200);
    const scene = fake.of('native', 'Scene');
    assert.equal(scene.length, 3);
    assert.match(scene[2]!.body.contents[0].parts[0].text, /Your previous reply was invalid: .*setting/);
    assert.equal(reply.body.timings.steps.find((step: any) => step.agent === 'Scene').attempts, 3);
  });

  it('fails the request with 502 naming the agent when a required agent exhausts its budget', async () => {
    fake.fail('native', 'Scene', ...Array.from({ length: 3 }, () => ({ kind: 'invalid-output' as const, text: 'no' })));
    const reply = await gen.post('/api/v1/timepoints/generate/sync', { query: QUERY });
    assert.equal(reply.status, 502);
    assert.equal(reply.body.agent, 'Scene');
    fake.reset();
    fake.fail('native', 'Moment', { kind: 'status', status: 500 }, { kind: 'status', status: 500 }, { kind: 'status', status: 500 });
    const upstream = await gen.post('/api/v1/timepoints/generate/sync', { query: QUERY });
    assert.equal(upstream.status, 502);
    assert.match(upstream.body.detail, /Moment failed: native answered 500/);
  });

  it('fails soft on Grounding and on images: warnings, no citations, no image', async () => {
    fake.fail('native', 'Grounding', { kind: 'status', status: 400 });
    fake.fail('native', 'ImageGen', { kind: 'status', status: 400 });
    fake.fail('image_vendor', 'ImageGen', { kind: 'status', status: 400 });
    fake.fail('aggregator', 'ImageGen', { kind: 'status', status: 400 });
    const reply = await gen.post('/api/v1/timepoints/generate/sync', { query: QUERY, generate_image: true });
    assert.equal(reply.status, 200);
    assert.ok(reply.body.warnings.some((w: string) => w.startsWith('Grounding failed and was skipped')));
    assert.ok(reply.body.warnings.some((w: string) => w.startsWith('ImageGen failed and was skipped')));
    assert.equal(reply.body.image_url, null);
    assert.equal(reply.body.confidence.grounding, null);
  });

  it('falls back along the image chain: native, then the image vendor', async () => {
    fake.fail('native', 'ImageGen', { kind: 'status', status: 400 });
    const reply = await gen.post('/api/v1/timepoints/generate/sync', { query: QUERY, generate_image: true, preset: 'hd' });
    assert.equal(reply.status, 200);
    assert.deepEqual(reply.body.models.image, { provider: 'image_vendor', model: 'stability/sd3.5-large' });
    assert.deepEqual(
      reply.body.models.image_chain.map((c: any) => c.model),
      ['gemini-2.5-flash-image', 'stability/sd3.5-large', 'google/gemini-2.5-flash-image'],
    );
    assert.equal(fake.of('image_vendor')[0]!.form!.model, 'sd3.5-large');
    assert.ok(reply.body.warnings.some((w: string) => /gemini-2.5-flash-image failed/.test(w)));
    // The failure the image vendor absorbed: a fallback, and an error of the native provider (what TemporaModelProviderFailing reads).
    const metrics = await scrape(gen);
    assert.match(metrics, /generation_provider_fallbacks_total\{[^}]*agent="ImageGen",from="native",to="image_vendor"[^}]*\} [1-9]/);
    assert.match(metrics, /generation_agent_errors_total\{[^}]*agent="ImageGen",provider="native",code="http"[^}]*\} [1-9]/);
    assert.match(metrics, /generation_pipeline_duration_seconds_count\{[^}]*mode="sync",preset="hd",outcome="completed"[^}]*\} [1-9]/);
  });

  it('lets Critique send Dialog back exactly once', async () => {
    const revise = {
      kind: 'output' as const,
      value: {
        score: 0.4,
        historical_accuracy: 0.9,
        dialog_quality: 0.3,
        revise: true,
        feedback: 'Use the real callsign Tranquility Base.',
        issues: ['callsign'],
        anachronisms: [],
      },
    };
    fake.fail('native', 'Critique', revise, revise, revise);
    const reply = await gen.post('/api/v1/timepoints/generate/sync', { query: QUERY });
    assert.equal(reply.status, 200);
    assert.equal(fake.of('native', 'Dialog').length, 2);
    assert.equal(fake.of('native', 'Critique').length, 2);
    assert.match(fake.of('native', 'Dialog')[1]!.body.contents[0].parts[0].text, /Use the real callsign Tranquility Base/);
    assert.equal(reply.body.critique.revised, true);
    assert.equal(reply.body.critique.revise, false);
  });

  it('answers 504 when the pipeline outlives GENERATION_TIMEOUT_MS', async () => {
    const slow = await startGeneration({ ...vendorEnv(fake), GENERATION_TIMEOUT_MS: '300', PROVIDER_TIMEOUT_MS: '5000' });
    try {
      fake.fail('native', 'Timeline', { kind: 'hang' });
      const reply = await slow.post('/api/v1/timepoints/generate/sync', { query: QUERY });
      assert.equal(reply.status, 504);
    } finally {
      await slow.stop();
    }
  });
});

describe('generation: offline provider (no keys, no network)', function () {
  let gen: GenerationHarness;
  before(async () => {
    gen = await startGeneration();
  });
  after(() => gen.stop());

  it('is the default with no key configured: deterministic, schema-valid, always marked offline', async () => {
    const body = { query: 'Julius Caesar is assassinated in the Senate, March 15 44 BC', generate_image: true };
    const one = await gen.post('/api/v1/timepoints/generate/sync', body);
    const two = await gen.post('/api/v1/timepoints/generate/sync', body);
    assert.equal(one.status, 200, JSON.stringify(one.body));
    assert.equal(one.body.model_provider, 'offline');
    assert.equal(one.body.year, -44);
    assert.equal(one.body.month, 3);
    assert.equal(one.body.day, 15);
    assert.equal(one.body.location.city, 'rome');
    assert.equal(one.body.characters[0].name, 'Julius Caesar');
    for (const field of ['scene', 'characters', 'relationships', 'moment', 'camera', 'dialog', 'critique', 'image_prompt'])
      assert.deepEqual(one.body[field], two.body[field], field);
    for (const agent of Object.values(one.body.models.agents) as any[]) assert.equal(agent.provider, 'offline');
    const image = await fetch(one.body.image_url.replace(/^https?:\/\/[^/]+/, gen.url));
    assert.equal(image.headers.get('content-type'), 'image/svg+xml');
  });

  it('never stands in for a provider that was asked for', async () => {
    for (const [body, field] of [
      [{ text_model: 'gemini-2.5-pro' }, 'body.text_model'],
      [{ text_model: 'anthropic/claude-sonnet-4' }, 'body.text_model'],
      [{ model_policy: 'permissive' }, 'body.model_policy'],
      [{ image_model: 'stability/sd3.5-large', generate_image: true }, 'body.image_model'],
    ] as const) {
      const reply = await gen.post('/api/v1/timepoints/generate/sync', { query: QUERY, ...body });
      assert.equal(reply.status, 422, JSON.stringify(body));
      assert.equal(reply.body.errors[0].path, field);
    }
  });

  it('builds on the graph service when it knows the moment', async () => {
    const { createServer } = await import('node:http');
    const graph = createServer((_request, response) => {
      response.writeHead(200, { 'content-type': 'application/json' });
      response.end(
        JSON.stringify({
          items: [
            {
              path: '1969/july/20/2017/united-states/texas/houston/apollo-11-moon-landing',
              event_name: 'Apollo 11 Moon Landing',
              description: 'Eagle lands in the Sea of Tranquility.',
              year: 1969,
              month_num: 7,
              day: 20,
              time: '2017',
              country: 'united-states',
              region: 'texas',
              city: 'houston',
              era: 'contemporary',
              latitude: 29.55,
              longitude: -95.09,
              figures: ['Neil Armstrong', 'Buzz Aldrin'],
              tags: ['space'],
              confidence: 0.95,
            },
          ],
          total: 1,
          limit: 1,
          offset: 0,
        }),
      );
    });
    await new Promise<void>((resolve) => graph.listen(0, '127.0.0.1', resolve));
    const port = (graph.address() as { port: number }).port;
    const known = await startGeneration({ GRAPH_LOOKUP: 'true', GRAPH_URL: `http://127.0.0.1:${port}` });
    try {
      const reply = await known.post('/api/v1/timepoints/generate/sync', { query: 'Apollo 11 moon landing' });
      assert.equal(reply.status, 200);
      assert.equal(reply.body.time, '2017');
      assert.equal(reply.body.date_precision, 'exact');
      assert.deepEqual(
        reply.body.characters.filter((c: any) => c.is_historical).map((c: any) => c.name),
        ['Neil Armstrong', 'Buzz Aldrin'],
      );
      assert.equal(reply.body.graph_moment, '1969/july/20/2017/united-states/texas/houston/apollo-11-moon-landing');
      assert.equal(reply.body.sources[0].kind, 'graph');
      assert.equal(reply.body.model_provider, 'offline');
    } finally {
      await known.stop();
      graph.close();
    }
  });
});
