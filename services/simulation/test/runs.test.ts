import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createDatabase, dropDatabase } from '../../../test/support/database.ts';
import { request } from '../../../test/support/http.ts';
import { launch, serviceListening } from '../../../test/support/platform.ts';
import { parseEvents } from '../../../test/support/sse.ts';
import { FakeModel } from '../../../test/support/stand-ins/chat-model.ts';
import { waitFor } from '../../../test/support/wait.ts';
import { asUser, SERVICE_KEY, type SimulationHarness, service, startSimulation } from './harness.ts';

/** Reads a Server-Sent Events response to its end: every event's name and data. */
async function readEvents(url: string, headers: Record<string, string>): Promise<Array<{ event: string; data: any }>> {
  const response = await fetch(url, { headers });
  assert.equal(response.status, 200);
  assert.match(response.headers.get('content-type') ?? '', /text\/event-stream/);
  const text = await response.text();
  return parseEvents(text);
}

describe('simulation runs: progress, cancellation, restarts', function () {
  this.timeout(120_000);
  let model: FakeModel;
  let sim: SimulationHarness;
  let budgets: string;
  const budget = async (harness: SimulationHarness, name: string) =>
    (await harness.call('GET', `/api/v1/simulations/budgets/${name}`, { headers: service })).body;

  before(async () => {
    model = await new FakeModel().start();
    budgets = mkdtempSync(join(tmpdir(), 'simulation-runs-'));
    writeFileSync(
      join(budgets, 'everyone.json'),
      JSON.stringify({ scope: 'global', period: 'monthly', limitUsd: 1000, perRunMaxUsd: null, alertThresholds: [0.5], exhausted: false }),
    );
    sim = await startSimulation({ OPENROUTER_BASE_URL: model.url, SIMULATION_BUDGETS_PATH: budgets, RUN_CONCURRENCY: '1' });
  });
  afterEach(() => {
    model.release();
    model.latencyMs = 0;
  });
  after(async () => {
    await sim?.stop();
    await model?.stop();
    rmSync(budgets, { recursive: true, force: true });
  });

  it('streams each step as it completes, then the end', async () => {
    model.latencyMs = 20;
    const started = await sim.call('POST', '/api/v1/simulate', { headers: asUser('streamer'), body: { template: 'apollo-13', fidelity: 1, mechanisms: [] } });
    const events = await readEvents(`${sim.url}/api/v1/simulations/${started.body.id}/events`, asUser('streamer'));
    assert.equal(events[0]!.event, 'run');
    assert.equal(events.at(-1)!.event, 'end');
    assert.equal(events.at(-1)!.data.status, 'completed');
    const steps = events.filter((event) => event.event === 'step');
    assert.deepEqual(
      steps.map((step) => step.data.seq),
      [0, 1, 2, 3, 4, 5],
      'every step once, in order',
    );
    assert.equal(steps[0]!.data.kind, 'direction');
    assert.ok(steps.slice(1).every((step) => step.data.kind === 'timepoint' && step.data.cost_usd > 0));
    // A stream opened after the end replays the steps and ends at once.
    const replay = await readEvents(`${sim.url}/api/v1/simulations/${started.body.id}/events`, asUser('streamer'));
    assert.equal(replay.filter((event) => event.event === 'step').length, 6);
    assert.equal((await sim.call('GET', `/api/v1/simulations/${started.body.id}/events`, { headers: asUser('intruder') })).status, 404);
  });

  it('reports progress while it runs, step by step', async () => {
    model.hold();
    const calls = model.requests.length;
    const started = await sim.call('POST', '/api/v1/simulate', {
      headers: asUser('watcher'),
      body: { template: 'athens-war-council', fidelity: 1, mechanisms: [] },
    });
    const id = started.body.id;
    await model.arrived(calls + 1);
    const running = (await sim.call('GET', `/api/v1/simulations/${id}`, { headers: asUser('watcher') })).body;
    assert.equal(running.status, 'running');
    assert.equal(running.progress.steps_done, 0);
    assert.equal((await sim.call('GET', `/api/v1/simulations/${id}/result`, { headers: asUser('watcher') })).status, 409);
    model.release();
    await sim.instance.simulations.waitFor(id, 20_000);
    assert.equal((await sim.call('GET', `/api/v1/simulations/${id}`, { headers: asUser('watcher') })).body.progress.percent, 100);
  });

  it('cancels within the model call in flight: the call is abandoned, nothing more is asked, the budget settles', async () => {
    model.hold();
    const before = model.requests.length;
    const started = await sim.call('POST', '/api/v1/simulate', {
      headers: asUser('canceller'),
      body: { template: 'athens-war-council', fidelity: 3, mechanisms: [] },
    });
    await model.arrived(before + 1);
    const abandoned = model.abandoned;
    const asked = Date.now();
    const cancelled = await sim.call('POST', `/api/v1/simulations/${started.body.id}/cancel`, { headers: asUser('canceller') });
    assert.equal(cancelled.status, 200, JSON.stringify(cancelled.body));
    assert.equal(cancelled.body.status, 'cancelled');
    assert.ok(Date.now() - asked < 2_000, 'it did not wait for the held call');
    assert.equal(cancelled.body.partial.reason, 'cancelled');
    await waitFor('the held calls to be abandoned', async () => model.abandoned > abandoned, { timeoutMs: 20_000 });
    const calls = model.requests.length;
    model.release();
    await new Promise((resolve) => setTimeout(resolve, 300));
    assert.equal(model.requests.length, calls, 'no call after the cancel');
    const result = (await sim.call('GET', `/api/v1/simulations/${started.body.id}/result`, { headers: asUser('canceller') })).body.result;
    assert.equal(result.partial.reason, 'cancelled');
    assert.equal((await budget(sim, 'everyone')).reserved_usd, 0, 'nothing stays reserved');
  });

  it('cancels a queued run before it starts', async () => {
    model.hold();
    const calls = model.requests.length;
    const first = await sim.call('POST', '/api/v1/simulate', { headers: asUser('queue'), body: { template: 'athens-war-council', fidelity: 1 } });
    const second = await sim.call('POST', '/api/v1/simulate', { headers: asUser('queue'), body: { template: 'athens-war-council', fidelity: 1 } });
    await model.arrived(calls + 1);
    const queued = (await sim.call('GET', `/api/v1/simulations/${second.body.id}`, { headers: asUser('queue') })).body;
    assert.equal(queued.status, 'queued', 'one run at a time here');
    const cancelled = await sim.call('POST', `/api/v1/simulations/${second.body.id}/cancel`, { headers: asUser('queue') });
    assert.equal(cancelled.body.status, 'cancelled');
    assert.equal(cancelled.body.started_at, null);
    assert.equal((await sim.call('POST', `/api/v1/simulations/${first.body.id}/cancel`, { headers: asUser('queue') })).body.status, 'cancelled');
    assert.equal((await sim.call('POST', `/api/v1/simulations/${first.body.id}/cancel`, { headers: asUser('queue') })).status, 409);
  });

  it('a run interrupted by a killed process is resumed by the next from its last completed step; nothing stays reserved', async () => {
    const database = await createDatabase('simulation_restart');
    const env = {
      ...process.env,
      DATABASE_URL: database,
      REDIS_URL: '',
      PORT: '0',
      METRICS_PORT: '0',
      HOST: '127.0.0.1',
      SERVICE_KEY,
      OPENROUTER_BASE_URL: model.url,
      SIMULATION_BUDGETS_PATH: budgets,
      RUN_LEASE_MS: '1500',
      RUN_CLAIM_INTERVAL_MS: '200',
      // Its "listening" line says which port it bound.
      LOG_LEVEL: 'info',
      OTEL_SDK_DISABLED: 'true',
    };
    const first = launch(fileURLToPath(new URL('../src/main.ts', import.meta.url)), [], env, serviceListening('simulation'));
    let child: ChildProcess | undefined = first.child;
    let resumed: SimulationHarness | undefined;
    try {
      const { url: base } = await first.announced;
      await waitFor('the first process', async () => (await request(base, '/health').catch(() => ({ status: 0 }))).status === 200, { timeoutMs: 60_000 });
      model.latencyMs = 150;
      const started = await request(base, '/api/v1/simulate', {
        method: 'POST',
        headers: asUser('survivor'),
        body: { template: 'constitutional-convention', fidelity: 1, mechanisms: [] },
      });
      assert.equal(started.status, 202);
      const id = started.body.id;
      await waitFor(
        'two steps',
        async () => (await request(base, `/api/v1/simulations/${id}`, { headers: asUser('survivor') })).body.progress.steps_done >= 2,
        { timeoutMs: 20_000 },
      );
      child.kill('SIGKILL');
      await new Promise((resolve) => child!.once('exit', resolve));
      child = undefined;
      const killedAt = new Date();

      resumed = await startSimulation({ OPENROUTER_BASE_URL: model.url, SIMULATION_BUDGETS_PATH: budgets, RUN_LEASE_MS: '1500' }, database);
      await resumed.instance.simulations.waitFor(id, 30_000);
      const run = (await resumed.call('GET', `/api/v1/simulations/${id}`, { headers: asUser('survivor') })).body;
      assert.equal(run.status, 'completed', JSON.stringify(run));
      assert.deepEqual(
        run.steps.map((step: any) => step.seq),
        [0, 1, 2, 3, 4],
        'each step once',
      );
      const before = run.steps.filter((step: any) => new Date(step.at) < killedAt).length;
      assert.ok(before >= 2 && before < 5, 'the steps before the kill were kept, the rest done after it');
      const row = await resumed.instance.repository.runs.get(id);
      assert.equal(row!.attempts, 2, 'claimed twice: once by each process');
      const result = await resumed.result(id, 'survivor');
      assert.deepEqual(
        result.timepoints.map((timepoint: any) => timepoint.id),
        ['t1', 't2', 't3', 't4', 't5'],
      );
      assert.equal((await budget(resumed, 'everyone')).reserved_usd, 0, 'nothing stays reserved');
      assert.equal((await budget(resumed, 'everyone')).spent_usd, run.cost.actual_usd);
    } finally {
      child?.kill('SIGKILL');
      await resumed?.stop();
      await dropDatabase(database);
    }
  });
});
