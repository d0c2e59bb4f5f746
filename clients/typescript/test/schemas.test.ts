/**
 * The operations whose answers the documents used to leave without a schema (so the client refused them):
 * the price list, the data export, the models, a scene's image, a simulation template, usage and result.
 * The platform's real answers now pass validation; answers of the wrong shape or media type are refused.
 */
import assert from 'node:assert/strict';
import { createDatabase, dropDatabase } from '../../../test/support/database.ts';
import { type Platform, startPlatform } from '../../../test/support/platform.ts';
import { data, InvalidAnswer, Tempora } from '../src/index.ts';
import { json, scriptedServer } from './local-server.ts';

const ID = '3f1d9a52-7c1e-4b8a-9d2f-0a1b2c3d4e5f';
const OTHER = '9e8d7c6b-5a49-4382-8716-f5e4d3c2b1a0';

describe('@tempora/client validates the answers the documents now describe (the running platform)', function () {
  let platform: Platform;
  let databaseUrl: string;
  let tempora: Tempora;

  before(async function () {
    this.timeout(300_000);
    databaseUrl = await createDatabase('client_schemas');
    platform = await startPlatform({ shared: { databaseUrl, redisUrl: process.env.REDIS_URL! } });
    tempora = new Tempora({ baseUrl: platform.urls.gateway });
    await tempora.signInDemo();
  });

  after(async function () {
    this.timeout(60_000);
    await platform?.stop();
    if (databaseUrl) await dropDatabase(databaseUrl);
  });

  it('the price list and the models', async () => {
    const costs = await data(new Tempora({ baseUrl: platform.urls.gateway }).api.GET('/api/v1/credits/costs'));
    assert.equal(costs.currency, 'credits');
    assert.ok(costs.operations.some((operation) => operation.operation === 'generation.balanced'));
    const models = await data(tempora.api.GET('/api/v1/models'));
    assert.equal(models.providers.offline, true);
    assert.deepEqual(models.presets.map((preset) => preset.name).sort(), ['balanced', 'gemini3', 'hd', 'hyper']);
  });

  it("a scene's image, as bytes of its image type", async function () {
    this.timeout(120_000);
    let scene: string | undefined;
    for await (const event of tempora.streamScene({ query: 'The first printed Bible leaves Mainz, 1455', generate_image: true }))
      if (event.event === 'done') scene = event.data.id as string;
    const { data: bytes, response } = await tempora.api.GET('/api/v1/timepoints/{id}/image', { params: { path: { id: scene! } }, parseAs: 'arrayBuffer' });
    assert.match(response.headers.get('content-type') ?? '', /^image\//);
    assert.ok((bytes as unknown as ArrayBuffer).byteLength > 0);
  });

  it('a simulation template, a run result (JSON and TDF) and usage', async function () {
    this.timeout(180_000);
    const templates = await data(tempora.api.GET('/api/v1/simulate/templates'));
    const template = await data(tempora.api.GET('/api/v1/simulate/templates/{id}', { params: { path: { id: templates.items[0]!.id } } }));
    assert.equal(template.id, templates.items[0]!.id);
    assert.ok(template.entities.length >= 3);

    const run = await tempora.simulate({ template: template.id, fidelity: 1, mechanisms: [] });
    for await (const event of tempora.simulationEvents(run.id)) if (event.event === 'end') break;
    const ended = await data(tempora.api.GET('/api/v1/simulations/{id}/result', { params: { path: { id: run.id } } }));
    assert.ok('run' in ended && ended.run.id === run.id && ended.result.timepoints.length > 0);
    const tdf = await data(tempora.api.GET('/api/v1/simulations/{id}/result', { params: { path: { id: run.id }, query: { format: 'tdf' } } }));
    assert.ok('tdf_hash' in tdf);

    const usage = await data(tempora.api.GET('/api/v1/simulations/usage'));
    assert.ok(usage.runs >= 1 && usage.by_model.length >= 1, JSON.stringify(usage));
  });

  it("the user's data export", async function () {
    this.timeout(60_000);
    const exported = await data(tempora.api.GET('/api/v1/users/me/export'));
    assert.equal(exported.format, 'tempora-user-export');
    assert.equal(exported.complete, true, JSON.stringify(exported.errors));
    assert.ok(exported.credits.ledger.length > 0);
  });
});

describe('@tempora/client refuses those answers in the wrong shape or media type', () => {
  const malformed: Array<[string, (tempora: Tempora) => Promise<unknown>, unknown]> = [
    ['GET /api/v1/credits/costs', (t) => t.api.GET('/api/v1/credits/costs'), { currency: 'credits', operations: [{ operation: 'x', cost: 'two' }] }],
    ['GET /api/v1/users/me/export', (t) => t.api.GET('/api/v1/users/me/export'), { format: 'tempora-user-export', version: 2, complete: 'yes' }],
    ['GET /api/v1/models', (t) => t.api.GET('/api/v1/models'), { providers: {}, presets: 'all' }],
    [
      'GET /api/v1/simulate/templates/{id}',
      (t) => t.api.GET('/api/v1/simulate/templates/{id}', { params: { path: { id: 'apollo-13' } } }),
      { id: 'apollo-13' },
    ],
    ['GET /api/v1/simulations/usage', (t) => t.api.GET('/api/v1/simulations/usage'), { runs: -0.5, cost_usd: 'none' }],
    [
      'GET /api/v1/simulations/{id}/result',
      (t) => t.api.GET('/api/v1/simulations/{id}/result', { params: { path: { id: ID } } }),
      { run: { id: ID }, result: { timepoints: [] } },
    ],
  ];

  for (const [operation, call, body] of malformed)
    it(`${operation}: a body that does not match its schema`, async () => {
      const server = await scriptedServer((_, response) => json(response, 200, body));
      try {
        const error = await call(new Tempora({ baseUrl: server.url, apiKey: 'key' })).then(
          () => assert.fail('the answer was expected to be refused'),
          (error: unknown) => error,
        );
        assert.ok(error instanceof InvalidAnswer, String(error));
        assert.equal(error.operation, operation);
      } finally {
        await server.close();
      }
    });

  it('GET /api/v1/simulations/{id}/result?format=tdf: a TDF record of another run', async () => {
    const record = (id: string) => ({
      id: `simulation:${id}`,
      version: '1.0',
      source: 'tempora-simulation',
      timestamp: '2026-01-01T00:00:00.000Z',
      provenance: {},
      payload: {},
      entity_ids: [],
      tdf_hash: '0'.repeat(64),
    });
    const server = await scriptedServer((_, response, count) => json(response, 200, record(count === 1 ? ID : OTHER)));
    try {
      const tempora = new Tempora({ baseUrl: server.url, apiKey: 'key' });
      const tdf = () => tempora.api.GET('/api/v1/simulations/{id}/result', { params: { path: { id: ID }, query: { format: 'tdf' } } });
      const answered = await data(tdf());
      assert.ok('tdf_hash' in answered && answered.id === `simulation:${ID}`);
      const error = await tdf().then(
        () => assert.fail('a record of another run was expected to be refused'),
        (error: unknown) => error,
      );
      assert.ok(error instanceof InvalidAnswer, String(error));
      assert.match(error.reason, /answers for id "simulation:9e8d/);
    } finally {
      await server.close();
    }
  });

  it("GET /api/v1/timepoints/{id}/image: bytes of an image type pass, JSON or HTML in an image's place do not", async () => {
    const answers = [
      { type: 'image/png', body: Buffer.from([0x89, 0x50, 0x4e, 0x47]) },
      { type: 'application/json', body: Buffer.from('{"url": "https://cdn.example/image.png"}') },
      { type: 'text/html', body: Buffer.from('<html>a captive portal</html>') },
    ];
    const server = await scriptedServer((_, response, count) => {
      response.writeHead(200, { 'content-type': answers[count - 1]!.type });
      response.end(answers[count - 1]!.body);
    });
    try {
      const tempora = new Tempora({ baseUrl: server.url, apiKey: 'key' });
      const image = () => tempora.api.GET('/api/v1/timepoints/{id}/image', { params: { path: { id: ID } }, parseAs: 'arrayBuffer' });
      const { data: bytes } = await image();
      assert.deepEqual([...new Uint8Array(bytes as unknown as ArrayBuffer)], [0x89, 0x50, 0x4e, 0x47]);
      for (const type of ['application/json', 'text/html']) {
        const error = await image().then(
          () => assert.fail(`${type} was expected to be refused`),
          (error: unknown) => error,
        );
        assert.ok(error instanceof InvalidAnswer, String(error));
        assert.match(error.reason, new RegExp(`media type "${type.replace('/', '\\/')}" is not documented \\(image/\\*\\)`));
      }
    } finally {
      await server.close();
    }
  });
});
