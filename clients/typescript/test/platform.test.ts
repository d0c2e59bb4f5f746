/**
 * @tempora/client against the whole platform as `npm start` runs it (test/support/platform.ts), on the test
 * PostgreSQL and Redis: the session the README shows, typed problems, idempotent retries, the rate limit,
 * and the committed OpenAPI documents checked against what the services serve.
 */
import assert from 'node:assert/strict';
import { createDatabase, dropDatabase } from '../../../test/support/database.ts';
import { type Platform, startPlatform } from '../../../test/support/platform.ts';
import { committedDocument, servedDocuments } from '../scripts/documents.ts';
import { data, type GenerationEvent, type SimulationEvent, Tempora, TemporaProblem } from '../src/index.ts';

describe('@tempora/client against the running platform', function () {
  let platform: Platform;
  let databaseUrl: string;

  before(async function () {
    this.timeout(300_000);
    databaseUrl = await createDatabase('client');
    platform = await startPlatform({ shared: { databaseUrl, redisUrl: process.env.REDIS_URL! } });
  });

  after(async function () {
    this.timeout(60_000);
    await platform?.stop();
    if (databaseUrl) await dropDatabase(databaseUrl);
  });

  it('serves the OpenAPI documents committed in clients/openapi/', async () => {
    const served = await servedDocuments(platform.urls);
    for (const [service, text] of Object.entries(served))
      assert.ok(
        text === committedDocument(service),
        `clients/openapi/${service}.json differs from what ${service} serves: run \`npm run export-documents -w @tempora/client\``,
      );
  });

  it('runs a complete session: sign in, read the graph, render a scene while streaming it, run a simulation and follow it, ask the conductor', async function () {
    this.timeout(240_000);
    const tempora = new Tempora({ baseUrl: platform.urls.gateway });
    const { user } = await tempora.signInDemo();
    assert.equal(user.is_demo, true);
    assert.equal((await data(tempora.api.GET('/api/v1/auth/me'))).id, user.id);

    const stats = await data(tempora.api.GET('/api/v1/graph/stats'));
    assert.ok(stats.total_nodes > 0, JSON.stringify(stats));
    const moments = await data(tempora.api.GET('/api/v1/graph/moments', { params: { query: { limit: 3 } } }));
    assert.equal(moments.items.length, 3);
    const first = moments.items[0]!;
    assert.ok('path' in first);
    const moment = await data(tempora.api.GET('/api/v1/graph/moments/{path}', { params: { path: { path: first.path.slice(1) } } }));
    assert.ok('path' in moment && moment.path === first.path);

    const progress: GenerationEvent[] = [];
    for await (const event of tempora.streamScene({ query: 'The signing of Magna Carta at Runnymede, 1215' })) progress.push(event);
    assert.equal(progress[0]!.event, 'start');
    assert.ok(progress.some((event) => event.event === 'agent'));
    const done = progress.at(-1)!;
    assert.equal(done.event, 'done');
    assert.ok('scene' in done.data, Object.keys(done.data).join(', '));

    const run = await tempora.simulate({ prompt: 'The printing press reaches Venice in 1469', mode: 'FORWARD', fidelity: 1 });
    const followed: SimulationEvent[] = [];
    for await (const event of tempora.simulationEvents(run.id)) followed.push(event);
    assert.equal(followed[0]!.event, 'run');
    assert.equal(followed.at(-1)!.event, 'end');
    assert.ok(followed.some((event) => event.event === 'step'));
    assert.deepEqual(
      followed.map((event) => Number(event.id)),
      followed.map((_, index) => index + 1),
    );

    const answer = await tempora.ask('How many moments does the graph hold?');
    assert.equal(typeof answer.reply, 'string');
    assert.ok(Array.isArray(answer.tools_called));

    const refresh = tempora.tokens!.refresh_token;
    await tempora.refresh();
    assert.notEqual(tempora.tokens!.refresh_token, refresh, 'the pair rotates');
    await tempora.signOut();
    assert.equal(tempora.tokens, undefined);
  });

  it('answers a missing moment with a typed 404 and a bad parameter with a typed 422', async () => {
    const tempora = new Tempora({ baseUrl: platform.urls.gateway });
    const missing = await tempora.api
      .GET('/api/v1/graph/moments/{path}', { params: { path: { path: '1066/october/14/0900/england/east-sussex/hastings/no-such-moment' } } })
      .catch((error) => error);
    assert.ok(missing instanceof TemporaProblem, String(missing));
    assert.equal(missing.status, 404);
    assert.equal(typeof missing.type, 'string');
    assert.ok(missing.detail.length > 0);
    const invalid = await tempora.api.GET('/api/v1/graph/moments', { params: { query: { limit: -1 } } }).catch((error) => error);
    assert.ok(invalid instanceof TemporaProblem, String(invalid));
    assert.equal(invalid.status, 422);
    assert.ok(invalid.errors.length > 0);
  });

  it('sends a simulation start again with its Idempotency-Key after the answer is lost, and the server starts one run', async function () {
    this.timeout(60_000);
    let armed = false;
    const keys: string[] = [];
    const tempora = new Tempora({
      baseUrl: platform.urls.gateway,
      retry: { backoffMs: 10 },
      // The first answer is lost on its way back, after the server has started the run.
      fetch: async (request) => {
        keys.push(request.headers.get('idempotency-key')!);
        const response = await fetch(request);
        if (!armed) return response;
        armed = false;
        await response.body?.cancel();
        throw new TypeError('fetch failed: the connection was reset');
      },
    });
    await tempora.signInDemo();
    keys.length = 0;
    armed = true;
    const run = await tempora.simulate({ prompt: 'The Library of Alexandria survives', mode: 'BRANCHING', fidelity: 1 });
    assert.equal(keys.length, 2);
    assert.equal(keys[0], keys[1]);
    const runs = await data(tempora.api.GET('/api/v1/simulations'));
    assert.deepEqual(
      runs.items.map((item) => item.id),
      [run.id],
      'one run started',
    );
  });

  it('honours Retry-After on a 429: the typed problem says how long, and a client that may wait gets its answer after it', async function () {
    this.timeout(150_000);
    const impatient = new Tempora({ baseUrl: platform.urls.gateway, retry: { maxWaitSeconds: 0 } });
    let limited: TemporaProblem | undefined;
    for (let i = 0; i < 200 && !limited; i++)
      await impatient.api.GET('/api/v1/graph/stats').catch((error) => {
        if (!(error instanceof TemporaProblem)) throw error;
        limited = error;
      });
    assert.ok(limited, 'the anonymous window ran out');
    assert.equal(limited.status, 429);
    assert.ok(limited.retryAfter !== undefined && limited.retryAfter > 0 && limited.retryAfter <= 60, String(limited.retryAfter));
    const started = Date.now();
    const patient = new Tempora({ baseUrl: platform.urls.gateway, retry: { maxWaitSeconds: 65 } });
    const stats = await data(patient.api.GET('/api/v1/graph/stats'));
    assert.ok(stats.total_nodes > 0);
    assert.ok(Date.now() - started >= (limited.retryAfter - 1) * 1000, 'it waited before trying again');
  });
});
