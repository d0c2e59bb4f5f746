import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FakeModel, minimalReply, type Responder } from '../../../test/support/stand-ins/chat-model.ts';
import { waitFor } from '../../../test/support/wait.ts';
import { scrape } from '../../kit/test/metrics-support.ts';
import { covers } from '../src/domain/budgets.ts';
import { asUser, type SimulationHarness, service, startSimulation, userId } from './harness.ts';

/** A budget as the operator writes it into its ConfigMap's budget.json. */
const budgetJson = (scope: string, limitUsd: number, perRunMaxUsd: number | null = null) =>
  JSON.stringify({ scope, period: 'daily', limitUsd, perRunMaxUsd, alertThresholds: [0.5, 0.8, 1], exhausted: false });

describe('simulation budgets', function () {
  this.timeout(120_000);
  let model: FakeModel;
  let sim: SimulationHarness;
  let directory: string;
  const write = (name: string, json: string) => writeFileSync(join(directory, `${name}.json`), json);
  const budget = async (name: string) => (await sim.call('GET', `/api/v1/simulations/budgets/${name}`, { headers: service })).body;
  const estimateOf = (body: Record<string, unknown>) => sim.instance.simulations.plan({ fidelity: 3, ...body } as never, 'x').allowanceMicros / 1e6;

  before(async () => {
    directory = mkdtempSync(join(tmpdir(), 'simulation-budgets-'));
    // The kubelet's own entries in a mounted ConfigMap: skipped.
    writeFileSync(join(directory, '..data'), 'not a budget');
    model = await new FakeModel().start();
    sim = await startSimulation({ SIMULATION_BUDGETS_PATH: directory, BUDGETS_RELOAD_MS: '100', OPENROUTER_BASE_URL: model.url, RUN_CONCURRENCY: '8' });
  });
  after(async () => {
    model?.release();
    await sim?.stop();
    await model?.stop();
    rmSync(directory, { recursive: true, force: true });
  });

  it('covers runs by scope: global, account, template, mode', () => {
    const run = { owner: 'u1', template: 'apollo-13', mode: 'DIRECTORIAL' as const };
    const spec = (scope: string) => ({ scope, period: 'daily' as const, limitUsd: 1, alertThresholds: [] });
    assert.deepEqual(
      ['global', 'account:u1', 'account:u2', 'template:apollo-13', 'template:trial-of-socrates', 'mode:DIRECTORIAL', 'mode:directorial', 'mode:FORWARD'].map(
        (scope) => covers(spec(scope), run),
      ),
      [true, true, false, true, false, true, true, false],
    );
  });

  it('reads a budget written while it runs, without a restart', async () => {
    assert.equal((await sim.call('GET', '/api/v1/simulations/budgets', { headers: service })).body.total, 0);
    write('reload', budgetJson(`account:${userId('reload')}`, 5));
    const listed = await waitFor(
      'the new budget',
      async () => {
        const reply = await sim.call('GET', '/api/v1/simulations/budgets', { headers: service });
        return reply.body.total === 1 && reply.body;
      },
      { timeoutMs: 20_000 },
    );
    assert.equal(listed.items[0].name, 'reload');
    assert.equal(listed.items[0].limit_usd, 5);
    assert.deepEqual([listed.limit, listed.offset], [100, 0], 'the list envelope');
    const past = (await sim.call('GET', '/api/v1/simulations/budgets?offset=1&limit=1', { headers: service })).body;
    assert.deepEqual([past.items.length, past.total, past.limit, past.offset], [0, 1, 1, 1]);
    assert.equal((await sim.call('GET', '/api/v1/simulations/budgets?limit=501', { headers: service })).status, 422);
    write('reload', budgetJson(`account:${userId('reload')}`, 7));
    await waitFor('the changed limit', async () => (await budget('reload')).limit_usd === 7, { timeoutMs: 20_000 });
  });

  it("keeps a budget's last good version when its file stops parsing, and says so", async () => {
    write('reload', '{"scope": "account:reload", "limitUsd": ');
    await waitFor('the error', async () => (await sim.call('GET', '/api/v1/simulations/budgets', { headers: service })).body.errors.length === 1, {
      timeoutMs: 20_000,
    });
    assert.equal((await budget('reload')).limit_usd, 7);
    write('reload', budgetJson(`account:${userId('reload')}`, -1));
    await waitFor(
      'the invalid limit',
      async () => /limitUsd/.test(JSON.stringify((await sim.call('GET', '/api/v1/simulations/budgets', { headers: service })).body.errors)),
      { timeoutMs: 20_000 },
    );
    assert.equal((await budget('reload')).limit_usd, 7);
    write('reload', budgetJson(`account:${userId('reload')}`, 7));
  });

  it('without SIMULATION_BUDGETS_PATH, reads simulation-budgets.json of the data directory, once it exists', async () => {
    const local = await startSimulation({ BUDGETS_RELOAD_MS: '100' });
    try {
      assert.equal((await local.call('GET', '/api/v1/simulations/budgets', { headers: service })).body.total, 0);
      writeFileSync(join(local.dataDir, 'simulation-budgets.json'), JSON.stringify({ 'local-daily': JSON.parse(budgetJson('global', 3)) }));
      const listed = await waitFor(
        'the local budget',
        async () => {
          const reply = await local.call('GET', '/api/v1/simulations/budgets', { headers: service });
          return reply.body.total === 1 && reply.body;
        },
        { timeoutMs: 20_000 },
      );
      assert.deepEqual([listed.items[0].name, listed.items[0].scope, listed.items[0].limit_usd], ['local-daily', 'global', 3]);
    } finally {
      await local.stop();
    }
  });

  it('is for services acting as themselves only', async () => {
    assert.equal((await sim.call('GET', '/api/v1/simulations/budgets', { headers: asUser('someone') })).status, 403);
    assert.equal((await sim.call('GET', '/api/v1/simulations/budgets/reload', { headers: asUser('someone') })).status, 403);
    assert.equal((await sim.call('GET', '/api/v1/simulations/budgets/nope', { headers: service })).status, 404);
    assert.equal((await sim.call('GET', '/api/v1/simulations/budgets/reload?period=2024-01', { headers: service })).status, 422);
  });

  it('refuses a run that does not fit, naming the budget and what it has left', async () => {
    write('small', budgetJson(`account:${userId('poor')}`, 0.1));
    await waitFor('the small budget', async () => (await budget('small')).limit_usd === 0.1, { timeoutMs: 20_000 });
    const reply = await sim.call('POST', '/api/v1/simulate', { headers: asUser('poor'), body: { template: 'apollo-13' } });
    assert.equal(reply.status, 402);
    assert.match(reply.headers.get('content-type') ?? '', /problem\+json/);
    assert.equal(reply.body.type, 'https://tempora.dev/problems/budget-exhausted');
    assert.equal(reply.body.budget, 'small');
    assert.equal(reply.body.remaining_usd, 0.1);
    assert.equal(reply.body.needed_usd, estimateOf({ template: 'apollo-13' }));
    assert.match(reply.body.detail, /budget small has \$0\.100000 left/);
    assert.equal((await sim.call('GET', '/api/v1/simulations', { headers: asUser('poor') })).body.total, 0, 'no run was created');
  });

  it('starts exactly as many of 200 concurrent runs as the budget has room for (20), and settles them', async () => {
    const body = { template: 'product-launch', fidelity: 3 };
    const estimate = estimateOf(body);
    write('burst', budgetJson(`account:${userId('burst')}`, Math.round(estimate * 20.5 * 1e6) / 1e6));
    await waitFor('the burst budget', async () => (await budget('burst')).limit_usd > 0, { timeoutMs: 20_000 });
    model.hold();
    const replies = await Promise.all(Array.from({ length: 200 }, () => sim.call('POST', '/api/v1/simulate', { headers: asUser('burst'), body })));
    const statuses = replies.map((reply) => reply.status);
    assert.equal(
      statuses.filter((status) => status === 202).length,
      20,
      JSON.stringify(replies.find((reply) => reply.status !== 202 && reply.status !== 402)?.body),
    );
    assert.equal(statuses.filter((status) => status === 402).length, 180);
    const held = await budget('burst');
    assert.equal(held.reserved_usd, Math.round(estimate * 20 * 1e6) / 1e6);
    assert.equal(held.spent_usd, 0);
    model.release();
    const ids = replies.filter((reply) => reply.status === 202).map((reply) => reply.body.id);
    await Promise.all(ids.map((id) => sim.instance.simulations.waitFor(id, 60_000)));
    const runs = await Promise.all(ids.map(async (id) => (await sim.call('GET', `/api/v1/simulations/${id}`, { headers: asUser('burst') })).body));
    assert.ok(
      runs.every((run) => run.status === 'completed'),
      JSON.stringify(runs.map((run) => run.status)),
    );
    const settled = await budget('burst');
    assert.equal(settled.reserved_usd, 0, 'nothing stays reserved');
    assert.equal(settled.runs, 20);
    const actual = runs.reduce((sum, run) => sum + Math.round(run.cost.actual_usd * 1e6), 0) / 1e6;
    assert.equal(settled.spent_usd, actual, 'the actual cost is what is spent');
    assert.ok(actual < estimate * 20, 'the actual, not the estimate');
    assert.equal(settled.remaining_usd, Math.round((settled.limit_usd - actual) * 1e6) / 1e6);
  });

  /** Entity answers of about 4,700 output tokens each: about a cent per call on the default model. */
  const verbose: Responder = (request) => {
    const reply = minimalReply(request) as Record<string, unknown>;
    return request.action === 'entity' ? { ...reply, summary: 's'.repeat(3900), reasoning: 'r'.repeat(3900), monologue: 'm'.repeat(11_000) } : reply;
  };

  it('stops a run at its per-run maximum at the next step, its partial result kept and marked', async () => {
    write('capped', budgetJson(`account:${userId('capped')}`, 5, 0.2));
    await waitFor('the capped budget', async () => (await budget('capped')).per_run_max_usd === 0.2, { timeoutMs: 20_000 });
    model.responder = verbose;
    const reply = await sim.run({ template: 'vaccine-trial', fidelity: 5, mechanisms: [] }, 'capped');
    model.responder = minimalReply;
    assert.equal(reply.body.status, 'stopped', JSON.stringify(reply.body));
    assert.equal(reply.body.cost.max_usd, 0.2);
    assert.equal(reply.body.partial.reason, 'per_run_max');
    assert.ok(reply.body.cost.actual_usd <= 0.2 && reply.body.cost.actual_usd > 0.05, 'close to, never past, its maximum');
    assert.ok(reply.body.progress.steps_done >= 1 && reply.body.progress.steps_done < reply.body.progress.steps_total);
    const result = (await sim.call('GET', `/api/v1/simulations/${reply.body.id}/result`, { headers: asUser('capped') })).body.result;
    assert.equal(result.partial.reason, 'per_run_max');
    assert.equal(result.timepoints.length, reply.body.progress.steps_done, 'the completed steps are kept');
    const tdf = await sim.call('GET', `/api/v1/simulations/${reply.body.id}/result?format=tdf`, { headers: asUser('capped') });
    assert.equal(tdf.body.provenance.partial.reason, 'per_run_max');
    const status = await budget('capped');
    assert.equal(status.reserved_usd, 0);
    assert.equal(status.spent_usd, reply.body.cost.actual_usd);
  });

  it("a caller's own max_cost_usd stops its run the same way", async () => {
    model.responder = verbose;
    const reply = await sim.run({ template: 'vaccine-trial', fidelity: 5, mechanisms: [], max_cost_usd: 0.2 }, 'frugal');
    model.responder = minimalReply;
    assert.equal(reply.body.status, 'stopped');
    assert.equal(reply.body.cost.max_usd, 0.2);
    assert.ok(reply.body.cost.actual_usd <= 0.2);
    assert.ok(reply.body.progress.steps_done >= 1 && reply.body.progress.steps_done < reply.body.progress.steps_total);
  });

  it("reports usage per user and per budget, and the budgets' figures as metrics", async () => {
    const own = await sim.call('GET', '/api/v1/simulations/usage', { headers: asUser('burst') });
    assert.equal(own.status, 200);
    assert.equal(own.body.user, userId('burst'));
    assert.equal(own.body.runs, 20);
    assert.equal(own.body.by_status.completed, 20);
    assert.equal(own.body.cost_usd, (await budget('burst')).spent_usd);
    assert.ok(own.body.by_model.length >= 1 && own.body.by_model[0].calls > 0);
    assert.equal((await sim.call('GET', `/api/v1/simulations/usage?user=${userId('capped')}`, { headers: asUser('burst') })).status, 403);
    const other = await sim.call('GET', `/api/v1/simulations/usage?user=${userId('capped')}`, { headers: service });
    assert.equal(other.body.runs, 1);
    const byBudget = await sim.call('GET', '/api/v1/simulations/usage?budget=burst', { headers: service });
    assert.equal(byBudget.body.runs, 20);
    assert.equal((await sim.call('GET', '/api/v1/simulations/usage?from=2030-01-02&to=2030-01-01', { headers: service })).status, 422);
    assert.equal((await sim.call('GET', '/api/v1/simulations/usage?from=yesterday', { headers: service })).status, 422);
    const metrics = await scrape(sim.server);
    const spent = (await budget('burst')).spent_usd;
    assert.match(metrics, new RegExp(`simulation_budget_spent_usd\\{budget="burst",period="\\d{4}-\\d{2}-\\d{2}",service="simulation"\\} ${spent}`));
    assert.match(metrics, /simulation_budget_remaining_usd\{budget="small"/);
    assert.match(metrics, /simulation_budget_refusals_total\{budget="burst",service="simulation"\} 180/);
    assert.match(metrics, /simulation_runs_finished_total\{mode="DIRECTORIAL",status="completed",service="simulation"\} 20/);
  });

  it('alerts crossed and exhaustion follow spend', async () => {
    const burst = await budget('burst');
    const fraction = burst.spent_usd / burst.limit_usd;
    assert.deepEqual(
      burst.alerts_crossed,
      [0.5, 0.8, 1].filter((threshold) => fraction >= threshold),
    );
    assert.equal(burst.exhausted, burst.spent_usd >= burst.limit_usd);
  });
});
