import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FakeModel } from '../../../test/support/stand-ins/chat-model.ts';
import { waitFor } from '../../../test/support/wait.ts';
import { asUser, type SimulationHarness, service, startSimulation, userId } from './harness.ts';

const ATHENS = { template: 'athens-war-council', fidelity: 1, mechanisms: [] };

describe('simulation Idempotency-Key', function () {
  this.timeout(120_000);
  let model: FakeModel;
  let sim: SimulationHarness;
  let directory: string;
  /** A daily budget of one account, so that each test reads figures of its own runs only. */
  const writeBudget = (user: string, limitUsd: number) =>
    writeFileSync(
      join(directory, `${user}.json`),
      JSON.stringify({ scope: `account:${userId(user)}`, period: 'daily', limitUsd, perRunMaxUsd: null, alertThresholds: [], exhausted: false }),
    );
  const budget = async (user: string) => (await sim.call('GET', `/api/v1/simulations/budgets/${user}`, { headers: service })).body;
  const post = (headers: Record<string, string>, key: string | undefined, body: unknown, wait = 0) =>
    sim.call('POST', `/api/v1/simulate${wait ? `?wait=${wait}` : ''}`, {
      headers: { ...headers, ...(key === undefined ? {} : { 'Idempotency-Key': key }) },
      body,
    });
  const runsOf = async (headers: Record<string, string>) => (await sim.call('GET', '/api/v1/simulations', { headers })).body.total;
  const rowsOf = async (name: string) => {
    const owner = userId(name);
    const knex = sim.instance.knex;
    const [runs] = await knex('simulation_runs').where({ owner }).count<Array<{ count: string }>>('* as count');
    const [reservations] = await knex('simulation_budget_reservations')
      .whereIn('run_id', knex('simulation_runs').select('id').where({ owner }))
      .count<Array<{ count: string }>>('* as count');
    return { runs: Number(runs!.count), reservations: Number(reservations!.count) };
  };

  before(async () => {
    directory = mkdtempSync(join(tmpdir(), 'simulation-idempotency-'));
    for (const user of ['replayer', 'crowd', 'lost']) writeBudget(user, 10);
    writeBudget('tight', 0.01);
    model = await new FakeModel().start();
    sim = await startSimulation({ SIMULATION_BUDGETS_PATH: directory, BUDGETS_RELOAD_MS: '100', OPENROUTER_BASE_URL: model.url });
  });
  afterEach(() => model.release());
  after(async () => {
    model?.release();
    await sim?.stop();
    await model?.stop();
    rmSync(directory, { recursive: true, force: true });
  });

  it('replays the run a key started: same id, status, shape and Location, Idempotent-Replayed, reserved once', async () => {
    model.hold();
    const first = await post(asUser('replayer'), 'order-1', { template: 'athens-war-council', mechanisms: [] });
    assert.equal(first.status, 202, JSON.stringify(first.body));
    assert.equal(first.headers.get('idempotent-replayed'), null);
    const reserved = (await budget('replayer')).reserved_usd;
    assert.ok(reserved > 0);
    assert.equal(reserved, first.body.budgets[0].reserved_usd);

    // The same request spelled differently: fields reordered, the default fidelity written out, the template padded.
    const again = await post(asUser('replayer'), 'order-1', { mechanisms: [], fidelity: 3, template: ' athens-war-council ' });
    assert.equal(again.status, 202, JSON.stringify(again.body));
    assert.equal(again.headers.get('idempotent-replayed'), 'true');
    assert.equal(again.body.id, first.body.id);
    assert.equal(again.headers.get('location'), first.headers.get('location'));
    assert.equal(again.body.status_url, first.body.status_url);
    assert.deepEqual(Object.keys(again.body).sort(), Object.keys(first.body).sort());
    assert.deepEqual(again.body.estimate, first.body.estimate);
    assert.equal((await budget('replayer')).reserved_usd, reserved, 'nothing more reserved');
    assert.deepEqual(await rowsOf('replayer'), { runs: 1, reservations: 1 });

    model.release();
    await sim.instance.simulations.waitFor(first.body.id, 30_000);
    // `wait` is not part of the request's fingerprint: it only holds the answer, as on a creation.
    const waited = await post(asUser('replayer'), 'order-1', { template: 'athens-war-council', mechanisms: [] }, 5);
    assert.equal(waited.status, 200);
    assert.equal(waited.body.status, 'completed');
    assert.equal(waited.headers.get('idempotent-replayed'), 'true');
    const late = await post(asUser('replayer'), 'order-1', { template: 'athens-war-council', mechanisms: [] });
    assert.equal(late.status, 202, 'answered as its creation was');
    assert.equal(late.body.status, 'completed', 'the run as it stands now');
    assert.equal(late.body.id, first.body.id);
    assert.equal(await runsOf(asUser('replayer')), 1);
    const settled = await budget('replayer');
    assert.deepEqual([settled.runs, settled.reserved_usd, settled.spent_usd], [1, 0, late.body.cost.actual_usd], 'one run charged, once');
  });

  it('a client whose answer was lost retries into the run it started', async () => {
    model.hold();
    const abandoned = new AbortController();
    const lost = fetch(`${sim.url}/api/v1/simulate?wait=30`, {
      method: 'POST',
      headers: { ...asUser('lost'), 'Idempotency-Key': 'lost-1', 'content-type': 'application/json' },
      body: JSON.stringify(ATHENS),
      signal: abandoned.signal,
    }).catch((error: unknown) => error);
    await waitFor('the run to be committed', async () => (await runsOf(asUser('lost'))) === 1, { timeoutMs: 20_000 });
    abandoned.abort();
    assert.equal(((await lost) as Error).name, 'AbortError');
    const retry = await post(asUser('lost'), 'lost-1', ATHENS);
    assert.equal(retry.status, 202);
    assert.equal(retry.headers.get('idempotent-replayed'), 'true');
    const listed = (await sim.call('GET', '/api/v1/simulations', { headers: asUser('lost') })).body;
    assert.equal(listed.total, 1);
    assert.equal(retry.body.id, listed.items[0].id);
    assert.deepEqual(await rowsOf('lost'), { runs: 1, reservations: 1 });
  });

  it('refuses the same key with a different request: 422 naming the header, nothing started', async () => {
    const first = await post(asUser('changer'), 'change-1', ATHENS);
    assert.equal(first.status, 202);
    const changed = await post(asUser('changer'), 'change-1', { ...ATHENS, fidelity: 2 });
    assert.equal(changed.status, 422);
    assert.match(changed.headers.get('content-type') ?? '', /application\/problem\+json/);
    assert.equal(changed.body.type, 'https://tempora.dev/problems/idempotency-key-reused');
    assert.match(changed.body.detail, /Idempotency-Key was used with a different request/);
    assert.deepEqual(
      changed.body.errors.map((error: any) => error.path),
      ['headers.idempotency-key'],
    );
    assert.equal(await runsOf(asUser('changer')), 1);
  });

  it('20 concurrent requests with one key start one run; the other 19 get it', async () => {
    model.hold();
    const replies = await Promise.all(Array.from({ length: 20 }, () => post(asUser('crowd'), 'crowd-1', ATHENS)));
    assert.deepEqual(new Set(replies.map((reply) => reply.status)), new Set([202]), JSON.stringify(replies.map((reply) => reply.body)));
    assert.equal(new Set(replies.map((reply) => reply.body.id)).size, 1, 'one run');
    assert.equal(replies.filter((reply) => reply.headers.get('idempotent-replayed') === 'true').length, 19);
    assert.deepEqual(await rowsOf('crowd'), { runs: 1, reservations: 1 });
    assert.equal((await budget('crowd')).reserved_usd, replies[0]!.body.budgets[0].reserved_usd, 'reserved once');
  });

  it('refuses an invalid Idempotency-Key with a 422 problem naming the header, starting nothing', async () => {
    const invalid = ['', 'k'.repeat(256), 'café', '"unterminated', '"an \\n escape"', '""'];
    for (const key of invalid) {
      const reply = await post(asUser('invalid'), key, ATHENS);
      assert.equal(reply.status, 422, `${JSON.stringify(key)}: ${reply.status}`);
      assert.match(reply.headers.get('content-type') ?? '', /application\/problem\+json/);
      assert.deepEqual(
        reply.body.errors.map((error: any) => error.path),
        ['headers.idempotency-key'],
        JSON.stringify(key),
      );
      assert.match(reply.body.detail, /idempotency-key/i);
    }
    assert.equal(await runsOf(asUser('invalid')), 0);
    assert.equal((await post(asUser('invalid'), 'k'.repeat(255), ATHENS)).status, 202);
    // The draft's quoted form (RFC 8941) is the same key as the bare one.
    const bare = await post(asUser('invalid'), 'a "key" \\ here', ATHENS);
    const quoted = await post(asUser('invalid'), '"a \\"key\\" \\\\ here"', ATHENS);
    assert.equal(bare.status, 202);
    assert.equal(quoted.headers.get('idempotent-replayed'), 'true');
    assert.equal(quoted.body.id, bare.body.id);
    assert.equal(await runsOf(asUser('invalid')), 2);
  });

  it('keys are per caller: three users and a service acting as itself each get their own run', async () => {
    const callers = [asUser('alice'), asUser('bob'), asUser('carol'), service];
    const replies = [];
    for (const headers of callers) replies.push(await post(headers, 'shared-key', ATHENS));
    assert.deepEqual(
      replies.map((reply) => reply.status),
      [202, 202, 202, 202],
    );
    assert.equal(new Set(replies.map((reply) => reply.body.id)).size, 4, 'four runs');
    assert.ok(replies.every((reply) => reply.headers.get('idempotent-replayed') === null));
    const bobAgain = await post(asUser('bob'), 'shared-key', ATHENS);
    assert.equal(bobAgain.body.id, replies[1]!.body.id);
    assert.equal(bobAgain.headers.get('idempotent-replayed'), 'true');
    // Alice's key is hers: another request under it is refused for her, and Bob's run is not hers to see.
    assert.equal((await post(asUser('alice'), 'shared-key', { ...ATHENS, fidelity: 2 })).status, 422);
    assert.equal((await sim.call('GET', `/api/v1/simulations/${replies[1]!.body.id}`, { headers: asUser('alice') })).status, 404);
  });

  it('documents the header as a parameter, and the replay, in /openapi.json', async () => {
    const operation = (await sim.call('GET', '/openapi.json')).body.paths['/api/v1/simulate'].post;
    const header = operation.parameters.find((parameter: { in: string; name: string }) => parameter.in === 'header' && parameter.name === 'idempotency-key');
    assert.ok(header, JSON.stringify(operation.parameters));
    assert.notEqual(header.required, true, 'optional');
    assert.match(header.description, /1–255 printable ASCII/);
    assert.match(operation.responses['202'].description, /Idempotent-Replayed: true/);
    assert.deepEqual(Object.keys(operation.responses['202'].headers), ['Location', 'Idempotent-Replayed']);
    assert.match(operation.responses['422'].description, /Idempotency-Key/);
  });

  it('a refused request keeps no key: after a 402, the same key starts the run once the budget has room', async () => {
    const refused = await post(asUser('tight'), 'tight-1', ATHENS);
    assert.equal(refused.status, 402, JSON.stringify(refused.body));
    writeBudget('tight', 10);
    await waitFor('the raised limit', async () => (await budget('tight')).limit_usd === 10, { timeoutMs: 20_000 });
    const started = await post(asUser('tight'), 'tight-1', ATHENS);
    assert.equal(started.status, 202, JSON.stringify(started.body));
    assert.equal(started.headers.get('idempotent-replayed'), null);
    assert.deepEqual(await rowsOf('tight'), { runs: 1, reservations: 1 });
  });
});
