import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AccountDeletionSchema, AccountExportPageSchema, encodeExportCursor } from '@tempora/kit/http';
import { FakeModel } from '../../../test/support/stand-ins/chat-model.ts';
import { waitFor } from '../../../test/support/wait.ts';
import { apiKey, asUser, type SimulationHarness, service, startSimulation, userId } from './harness.ts';

const data = (user: string, query = '') => `/api/v1/users/${userId(user)}/data${query}`;
/** A creation time as an export position holds it, to the microsecond. */
const MICROS = '2026-01-01T00:00:00.000001Z';
/** A finished run of `user`, written directly: its steps, calls and keys are what a test is about. */
const runRow = (id: string, user: string, index: number) => ({
  id,
  owner: userId(user),
  caller: 'test',
  status: 'completed',
  mode: 'FORWARD',
  fidelity: 1,
  prompt: `scenario ${index}`,
  mechanisms: '[]',
  plan: '{}',
  steps_total: 1,
  steps_done: 1,
  estimate_micros: 1,
  cap_micros: 1,
  result: JSON.stringify({ n: index }),
});

describe('simulation account data: deletion and export', function () {
  this.timeout(120_000);
  let model: FakeModel;
  let sim: SimulationHarness;
  let budgets: string;

  /** What the database holds of `owner`, table by table. */
  async function held(name: string) {
    const owner = userId(name);
    const knex = sim.instance.knex;
    const runs = knex('simulation_runs').select('id').where({ owner });
    const count = async (query: any) => Number((await query.count('* as count'))[0].count);
    return {
      runs: await count(knex('simulation_runs').where({ owner })),
      steps: await count(knex('simulation_steps').whereIn('run_id', runs.clone())),
      calls: await count(knex('simulation_calls').whereIn('run_id', runs.clone())),
      idempotency_keys: await count(knex('simulation_idempotency_keys').where({ owner })),
    };
  }
  const budget = async (name: string) => (await sim.call('GET', `/api/v1/simulations/budgets/${name}`, { headers: service })).body;

  /** Every page of an export, following next_cursor. */
  async function exportAll(user: string, limit?: number) {
    const pages = [];
    let cursor: string | null | undefined;
    do {
      const query = new URLSearchParams({ ...(cursor ? { cursor } : {}), ...(limit ? { limit: String(limit) } : {}) }).toString();
      const reply = await sim.call('GET', data(user, query ? `?${query}` : ''), { headers: service });
      assert.equal(reply.status, 200, JSON.stringify(reply.body));
      const page = AccountExportPageSchema.parse(reply.body);
      assert.equal(page.service, 'simulation');
      pages.push(page);
      cursor = page.next_cursor;
      assert.ok(pages.length < 100, 'the export ends');
    } while (cursor);
    return pages;
  }

  before(async () => {
    model = await new FakeModel().start();
    budgets = mkdtempSync(join(tmpdir(), 'simulation-accounts-'));
    const limit = (scope: string) => JSON.stringify({ scope, period: 'monthly', limitUsd: 1000, perRunMaxUsd: null, alertThresholds: [0.5], exhausted: false });
    writeFileSync(join(budgets, 'everyone.json'), limit('global'));
    writeFileSync(join(budgets, 'alice-cap.json'), limit(`account:${userId('alice')}`));
    sim = await startSimulation({ OPENROUTER_BASE_URL: model.url, SIMULATION_BUDGETS_PATH: budgets, RUN_CONCURRENCY: '1' });
  });
  afterEach(() => model.release());
  after(async () => {
    await sim?.stop();
    await model?.stop();
    rmSync(budgets, { recursive: true, force: true });
  });

  it('deletes every row of the user and nothing of anyone else; a second call deletes nothing', async () => {
    const runBody = { template: 'athens-war-council', fidelity: 1, mechanisms: [] };
    const keyed = await sim.call('POST', '/api/v1/simulate?wait=30', { headers: { ...asUser('alice'), 'Idempotency-Key': 'alice-1' }, body: runBody });
    assert.equal(keyed.status, 200, JSON.stringify(keyed.body));
    assert.equal((await sim.run({ prompt: 'A harbour town votes on a new lighthouse', fidelity: 1 }, 'alice')).status, 200);
    assert.equal((await sim.run(runBody, 'bob')).status, 200);
    const before = await held('alice');
    assert.equal(before.runs, 2);
    assert.equal(before.idempotency_keys, 1);
    assert.ok(before.steps > 0 && before.calls > 0);
    const bob = await held('bob');
    const spent = (await budget('everyone')).spent_usd;
    assert.ok((await budget('alice-cap')).runs >= 2, 'the account budget has a ledger');

    const deleted = await sim.call('DELETE', data('alice'), { headers: service });
    assert.equal(deleted.status, 200, JSON.stringify(deleted.body));
    assert.deepEqual(AccountDeletionSchema.parse(deleted.body), { service: 'simulation', deleted: { ...before, budget_ledger: 1 }, kept: {}, notes: [] });
    assert.deepEqual(await held('alice'), { runs: 0, steps: 0, calls: 0, idempotency_keys: 0 });
    assert.equal((await sim.instance.knex('simulation_budget_ledger').where({ budget: 'alice-cap' })).length, 0);
    assert.deepEqual(await held('bob'), bob, "bob's runs are untouched");
    assert.equal((await budget('everyone')).spent_usd, spent, 'the global budget keeps what was spent');
    assert.equal((await sim.call('GET', `/api/v1/simulations/${keyed.body.id}`, { headers: asUser('alice') })).status, 404);
    assert.equal((await sim.call('GET', '/api/v1/simulations', { headers: asUser('alice') })).body.total, 0);

    const again = await sim.call('DELETE', data('alice'), { headers: service });
    assert.equal(again.status, 200);
    assert.deepEqual(again.body.deleted, { runs: 0, steps: 0, calls: 0, idempotency_keys: 0, budget_ledger: 0 });
    // The key is free again: the same request starts a new run instead of answering the deleted one.
    const fresh = await sim.call('POST', '/api/v1/simulate', { headers: { ...asUser('alice'), 'Idempotency-Key': 'alice-1' }, body: runBody });
    assert.equal(fresh.status, 202);
    assert.notEqual(fresh.body.id, keyed.body.id);
    await sim.instance.simulations.waitFor(fresh.body.id, 30_000);
  });

  it('answers only the service key alone', async () => {
    assert.equal((await sim.run({ template: 'athens-war-council', fidelity: 1, mechanisms: [] }, 'erin')).status, 200);
    for (const method of ['DELETE', 'GET']) {
      const refusals: Array<[Record<string, string>, number]> = [
        [{}, 401],
        [{ 'X-Service-Key': 'not-the-key-0123456789' }, 401],
        [asUser('erin'), 403],
        [asUser('someone-else'), 403],
        [apiKey, 403],
      ];
      for (const [headers, status] of refusals) {
        const reply = await sim.call(method, data('erin'), { headers });
        assert.equal(reply.status, status, `${method} with ${Object.keys(headers).join('+') || 'nothing'}: ${JSON.stringify(reply.body)}`);
        assert.match(reply.headers.get('content-type') ?? '', /application\/problem\+json/);
      }
    }
    assert.equal((await held('erin')).runs, 1, 'nothing was deleted by a refused call');
    assert.equal((await sim.call('DELETE', `/api/v1/users/${'x'.repeat(129)}/data`, { headers: service })).status, 422);
  });

  it('stops a run in flight here and a queued one: nothing of them is written back', async () => {
    model.hold();
    const calls = model.requests.length;
    const abandoned = model.abandoned;
    const body = { template: 'athens-war-council', fidelity: 3, mechanisms: [] };
    // Waiting for its end when the account goes: the wait ends at once, the run being gone.
    const waiting = sim.call('POST', '/api/v1/simulate?wait=60', { headers: asUser('carol'), body });
    await model.arrived(calls + 1);
    const queued = await sim.call('POST', '/api/v1/simulate', { headers: asUser('carol'), body });
    assert.equal(queued.body.status, 'queued', 'one run at a time here');
    const events = await fetch(`${sim.url}/api/v1/simulations/${queued.body.id}/events`, { headers: asUser('carol') });
    assert.equal(events.status, 200);
    const stream = events.text();
    assert.equal((await budget('everyone')).reserved_usd > 0, true);

    const asked = Date.now();
    const deleted = await sim.call('DELETE', data('carol'), { headers: service });
    assert.equal(deleted.status, 200, JSON.stringify(deleted.body));
    assert.equal(deleted.body.deleted.runs, 2);
    const waited = await waiting;
    assert.equal(waited.status, 404, JSON.stringify(waited.body));
    assert.ok(Date.now() - asked < 5_000, 'the waiting request did not wait for its run');
    assert.match(await stream, /event: error\ndata: .*"status":404/);
    await waitFor('the held call to be abandoned', async () => model.abandoned > abandoned, { timeoutMs: 20_000 });
    await waitFor('the runner to let go', async () => sim.instance.runner.activeRuns === 0, { timeoutMs: 20_000 });

    const asking = model.requests.length;
    model.release();
    await new Promise((resolve) => setTimeout(resolve, 800));
    assert.equal(model.requests.length, asking, 'no model call after the deletion');
    assert.deepEqual(await held('carol'), { runs: 0, steps: 0, calls: 0, idempotency_keys: 0 });
    assert.equal((await budget('everyone')).reserved_usd, 0, 'nothing stays reserved');
  });

  it('stops a run executing on another replica, which writes nothing back', async () => {
    // A second replica on the same database that runs nothing: the deletion is asked there.
    const deleter = await startSimulation({ OPENROUTER_BASE_URL: model.url, SIMULATION_BUDGETS_PATH: budgets }, sim.databaseUrl);
    try {
      await deleter.instance.runner.stop(0);
      model.hold();
      const calls = model.requests.length;
      const abandoned = model.abandoned;
      const started = await sim.call('POST', '/api/v1/simulate', {
        headers: asUser('dan'),
        body: { template: 'athens-war-council', fidelity: 3, mechanisms: [] },
      });
      await model.arrived(calls + 1);
      const deleted = await deleter.call('DELETE', data('dan'), { headers: service });
      assert.equal(deleted.status, 200);
      assert.equal(deleted.body.deleted.runs, 1);
      // The executing replica learns it at its next lease renewal (every second) and aborts the call.
      await waitFor('the held call to be abandoned', async () => model.abandoned > abandoned, { timeoutMs: 5_000 });
      await waitFor('the runner to let go', async () => sim.instance.runner.activeRuns === 0, { timeoutMs: 5_000 });
      const asking = model.requests.length;
      model.release();
      await new Promise((resolve) => setTimeout(resolve, 800));
      assert.equal(model.requests.length, asking, 'no model call after the deletion');
      assert.equal(await sim.instance.repository.runs.get(started.body.id), undefined);
      assert.deepEqual(await held('dan'), { runs: 0, steps: 0, calls: 0, idempotency_keys: 0 });
      assert.equal((await budget('everyone')).reserved_usd, 0, 'nothing stays reserved');
    } finally {
      await deleter.stop();
    }
  });

  it('exports every run, step, call and key across pages, each once, and nothing after deletion', async () => {
    const real = await sim.run({ template: 'athens-war-council', fidelity: 1, mechanisms: [] }, 'frank');
    assert.equal(real.status, 200);
    // Many more runs than one page holds, written directly: executing 600 runs would prove nothing more.
    const knex = sim.instance.knex;
    const ids = Array.from({ length: 600 }, () => randomUUID());
    await knex('simulation_runs').insert(ids.map((id, index) => runRow(id, 'frank', index)));
    await knex('simulation_steps').insert(
      ids.slice(0, 300).map((id) => ({ run_id: id, seq: 0, kind: 'timepoint', label: 't1', detail: '{}', cost_micros: 1 })),
    );
    await knex('simulation_idempotency_keys').insert(
      ids.slice(0, 250).map((id, index) => ({ owner: userId('frank'), key: `key-${index}`, fingerprint: 'f', run_id: id })),
    );
    const expected = await held('frank');
    assert.equal(expected.runs, 601);

    for (const limit of [undefined, 500, 77]) {
      const pages = await exportAll('frank', limit);
      const of = (kind: string) => pages.filter((page) => page.kind === kind).flatMap((page) => page.items);
      assert.deepEqual([...new Set(pages.map((page) => page.kind))], ['runs', 'steps', 'calls', 'idempotency_keys'], 'kinds in their fixed order');
      assert.ok(pages.every((page) => page.items.length <= (limit ?? 200)));
      assert.ok(pages.filter((page) => page.kind === 'runs').length >= 2, 'the runs span several pages');
      const runs = of('runs');
      assert.equal(runs.length, 601);
      assert.equal(new Set(runs.map((run) => run.id)).size, 601, 'no run twice');
      assert.deepEqual(new Set(runs.map((run) => run.id)), new Set([...ids, real.body.id]), 'no run missing');
      const steps = of('steps');
      assert.equal(steps.length, expected.steps);
      assert.equal(new Set(steps.map((step) => `${step.run_id}/${step.seq}`)).size, expected.steps);
      const calls = of('calls');
      assert.equal(calls.length, expected.calls);
      assert.equal(new Set(calls.map((call) => call.id)).size, expected.calls);
      const keys = of('idempotency_keys');
      assert.equal(keys.length, 250);
      assert.equal(new Set(keys.map((key) => key.key)).size, 250);
    }

    // A run comes with its prompt, plan and result; its steps and calls are those the API shows.
    const pages = await exportAll('frank', 500);
    const exported = pages.flatMap((page) => (page.kind === 'runs' ? page.items : [])).find((run) => run.id === real.body.id)!;
    const shown = (await sim.call('GET', `/api/v1/simulations/${real.body.id}`, { headers: asUser('frank') })).body;
    assert.equal(exported.status, 'completed');
    assert.deepEqual(exported.result, await sim.result(real.body.id, 'frank'));
    assert.equal((exported.plan as { template: string }).template, 'athens-war-council');
    const realSteps = pages.flatMap((page) => (page.kind === 'steps' ? page.items : [])).filter((step) => step.run_id === real.body.id);
    assert.deepEqual(
      realSteps.map(({ run_id: _run, ...step }) => step),
      shown.steps,
    );
    const realCalls = pages.flatMap((page) => (page.kind === 'calls' ? page.items : [])).filter((call) => call.run_id === real.body.id);
    assert.equal(realCalls.length, shown.cost.calls);

    assert.equal((await sim.call('GET', data('frank', '?limit=501'), { headers: service })).status, 422);
    assert.equal((await sim.call('DELETE', data('frank'), { headers: service })).body.deleted.runs, 601);
    const empty = await exportAll('frank');
    assert.deepEqual(
      empty.map((page) => [page.kind, page.items.length]),
      [
        ['runs', 0],
        ['steps', 0],
        ['calls', 0],
        ['idempotency_keys', 0],
      ],
    );
  });

  it('exports each kind oldest first, then by its key, page by page, each item once', async () => {
    const knex = sim.instance.knex;
    // Times a millisecond cannot tell apart, the middle one shared; keys in an order other than their times'.
    const [t0, t1, t2] = [MICROS, '2026-01-01T00:00:00.000002Z', '2026-01-01T00:00:00.000900Z'];
    const u = Array.from({ length: 5 }, () => randomUUID()).sort();
    const runs: Array<[number, string]> = [
      [3, t1],
      [1, t2],
      [0, t1],
      [4, t0],
      [2, t1],
    ];
    await knex('simulation_runs').insert(runs.map(([n, at]) => ({ ...runRow(u[n]!, 'grace', n), created_at: at })));
    const steps: Array<[number, number, string]> = [
      [3, 0, t1],
      [0, 10, t1],
      [0, 2, t0],
      [0, 9, t1],
      [3, 1, t0],
      [0, 0, t1],
    ];
    const step = { kind: 'timepoint', label: 't1', detail: '{}', cost_micros: 1 };
    await knex('simulation_steps').insert(steps.map(([n, seq, at]) => ({ ...step, run_id: u[n], seq, created_at: at })));
    // Ids past where the sequence gets to, around a power of ten: they compare as numbers, not as text.
    const calls: Array<[string, string]> = [
      ['10000000000000000', t1],
      ['9000000000000000', t2],
      ['9000000000000002', t0],
      ['9000000000000001', t1],
    ];
    const call = { step: 0, action: 'plan', provider: 'offline', model: 'm', priced_as: 'm', input_tokens: 1, output_tokens: 1, thinking_tokens: 0 };
    await knex('simulation_calls').insert(calls.map(([id, at]) => ({ ...call, id, run_id: u[0], cost_micros: 1, duration_ms: 1, created_at: at })));
    const keys: Array<[string, string]> = [
      ['a', t1],
      ['z', t0],
      ['_a', t1],
      ['a/b', t1],
      ['B', t1],
    ];
    await knex('simulation_idempotency_keys').insert(
      keys.map(([key, at], index) => ({ owner: userId('grace'), key, fingerprint: 'f', run_id: u[index], created_at: at })),
    );

    for (const limit of [1, 2, 3]) {
      const pages = await exportAll('grace', limit);
      assert.ok(pages.every((page) => page.items.length <= limit));
      assert.ok(
        pages.every((page) => page.items.every((item) => !('position_at' in item))),
        'items keep their shape',
      );
      const of = (kind: string) => pages.filter((page) => page.kind === kind).flatMap((page) => page.items);
      assert.deepEqual(
        of('runs').map((run) => run.id),
        [4, 0, 2, 3, 1].map((n) => u[n]),
        `runs by limit ${limit}`,
      );
      assert.deepEqual(
        of('steps').map((item) => [item.run_id, item.seq]),
        [
          [u[0], 2],
          [u[3], 1],
          [u[0], 0],
          [u[0], 9],
          [u[0], 10],
          [u[3], 0],
        ],
        `steps by limit ${limit}`,
      );
      assert.deepEqual(
        of('calls').map((item) => item.id),
        ['9000000000000002', '9000000000000001', '10000000000000000', '9000000000000000'],
        `calls by limit ${limit}`,
      );
      assert.deepEqual(
        of('idempotency_keys').map((item) => item.key),
        ['z', 'B', '_a', 'a', 'a/b'],
        `keys by limit ${limit}, byte by byte`,
      );
    }
  });

  it('refuses a cursor it did not give out with 400', async () => {
    const cursors = [
      'not-a-cursor',
      Buffer.from('{"kind":"runs"}').toString('base64url'),
      encodeExportCursor({ kind: 4, after: '' }),
      encodeExportCursor({ kind: 0, after: 'not-a-uuid' }),
      encodeExportCursor({ kind: 1, after: `${randomUUID()}/x` }),
      encodeExportCursor({ kind: 1, after: `${randomUUID()}/1/2` }),
      encodeExportCursor({ kind: 2, after: '12; drop table simulation_runs' }),
      // Positions of the old form, by key alone: this service no longer hands them out.
      encodeExportCursor({ kind: 0, after: randomUUID() }),
      encodeExportCursor({ kind: 1, after: `${randomUUID()}/3` }),
      encodeExportCursor({ kind: 2, after: '12' }),
      encodeExportCursor({ kind: 3, after: 'key-1' }),
      encodeExportCursor({ kind: 0, after: `2026-01-01T00:00:00.001Z/${randomUUID()}` }),
    ];
    for (const cursor of cursors) {
      const reply = await sim.call('GET', data('anyone', `?cursor=${encodeURIComponent(cursor)}`), { headers: service });
      assert.equal(reply.status, 400, `${cursor}: ${JSON.stringify(reply.body)}`);
      assert.match(reply.headers.get('content-type') ?? '', /application\/problem\+json/);
      assert.match(reply.body.detail, /cursor/);
    }
    const valid = await sim.call('GET', data('anyone', `?cursor=${encodeExportCursor({ kind: 1, after: `${MICROS}/${randomUUID()}/3` })}`), {
      headers: service,
    });
    assert.equal(valid.status, 200);
    assert.equal(valid.body.kind, 'steps');
  });

  it("is documented with the kit's schemas, for the service key only", async () => {
    const openapi = (await sim.call('GET', '/openapi.json')).body;
    const path = openapi.paths['/api/v1/users/{user_id}/data'];
    assert.deepEqual(path.delete.security, [{ ServiceKey: [] }]);
    assert.deepEqual(path.get.security, [{ ServiceKey: [] }]);
    assert.match(JSON.stringify(path.delete.responses['200']), /AccountDeletion/);
    assert.match(JSON.stringify(path.get.responses['200']), /AccountExportPage/);
  });
});
