import assert from 'node:assert/strict';
import { canonicalJson, tdfHash } from '@tempora/kit/moments';
import { scrape } from '../../kit/test/metrics-support.ts';
import { apiKey, asUser, type SimulationHarness, service, startSimulation } from './harness.ts';

describe('simulation API', function () {
  let sim: SimulationHarness;
  before(async () => (sim = await startSimulation()));
  after(async () => sim?.stop());

  it('health, metrics, OpenAPI and the docs are served', async () => {
    const health = await sim.call('GET', '/health');
    assert.equal(health.status, 200);
    assert.equal(health.body.status, 'ok');
    assert.equal(health.body.service, 'simulation');
    assert.equal(health.body.version, '0.1.0');
    assert.match(health.body.timestamp, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
    const metrics = await scrape(sim.server);
    assert.match(metrics, /simulation_runs_active/);
    const openapi = await sim.call('GET', '/openapi.json');
    for (const path of [
      '/api/v1/simulate',
      '/api/v1/simulate/templates',
      '/api/v1/simulations/{id}/events',
      '/api/v1/simulations/{id}/result',
      '/api/v1/simulations/budgets',
      '/api/v1/simulations/usage',
    ])
      assert.ok(openapi.body.paths[path], path);
    assert.equal((await sim.call('GET', '/docs')).status, 200);
    assert.equal((await sim.call('GET', '/redoc')).status, 200);
  });

  it('lists the 21 templates, needing no credential, and serves each', async () => {
    const list = await sim.call('GET', '/api/v1/simulate/templates');
    assert.equal(list.status, 200);
    assert.deepEqual(
      [list.body.total, list.body.items.length, list.body.limit, list.body.offset],
      [21, 21, 50, 0],
      'the list envelope; the default page holds every template',
    );
    const modes = new Set(list.body.items.map((item: any) => item.mode));
    assert.deepEqual([...modes].sort(), ['BRANCHING', 'CYCLICAL', 'DIRECTORIAL', 'FORWARD', 'PORTAL']);
    for (const item of list.body.items) {
      assert.ok(item.entities.length >= 3 && item.timepoints.length >= 3 && item.mechanisms.length >= 1, item.id);
      assert.ok(['standard', 'advanced', 'premium'].includes(item.tier));
      assert.ok(item.cost_estimate_usd['1'] >= 0.15 && item.cost_estimate_usd['5'] <= 1);
    }
    const portal = await sim.call('GET', '/api/v1/simulate/templates?mode=portal');
    assert.ok(portal.body.items.every((item: any) => item.mode === 'PORTAL') && portal.body.total >= 3);
    assert.deepEqual(Object.keys(portal.body).sort(), ['items', 'limit', 'offset', 'total']);
    const one = await sim.call('GET', '/api/v1/simulate/templates/trial-of-socrates');
    assert.equal(one.body.knowledge.length > 0, true);
    assert.equal((await sim.call('GET', '/api/v1/simulate/templates/no-such-thing')).status, 404);
  });

  it('pages the templates with limit and offset, and refuses bad ones', async () => {
    const all = (await sim.call('GET', '/api/v1/simulate/templates')).body.items.map((item: any) => item.id);
    assert.deepEqual(all, [...all].sort(), 'ordered by id');
    const paged: string[] = [];
    for (let offset = 0; offset < 21; offset += 5) {
      const page = await sim.call('GET', `/api/v1/simulate/templates?limit=5&offset=${offset}`);
      assert.equal(page.status, 200);
      assert.deepEqual([page.body.total, page.body.limit, page.body.offset], [21, 5, offset]);
      paged.push(...page.body.items.map((item: any) => item.id));
    }
    assert.deepEqual(paged, all, 'every template once across the pages');
    const past = await sim.call('GET', '/api/v1/simulate/templates?offset=21');
    assert.deepEqual([past.body.items.length, past.body.total], [0, 21]);
    const filtered = await sim.call('GET', '/api/v1/simulate/templates?domain=business&limit=1&offset=1');
    assert.equal(filtered.body.items.length, 1);
    assert.equal(filtered.body.items[0].domain, 'business');
    assert.ok(filtered.body.total > 1 && filtered.body.total < 21);
    for (const query of ['limit=0', 'limit=101', 'limit=abc', 'offset=-1', 'offset=1.5']) {
      const reply = await sim.call('GET', `/api/v1/simulate/templates?${query}`);
      assert.equal(reply.status, 422, query);
      assert.match(JSON.stringify(reply.body.errors), /query\.(limit|offset)/, query);
    }
    const documented = (await sim.call('GET', '/openapi.json')).body.paths['/api/v1/simulate/templates'].get.parameters.map((parameter: any) => parameter.name);
    for (const name of ['limit', 'offset', 'mode', 'domain']) assert.ok(documented.includes(name), name);
  });

  describe('refuses bad input with a problem, never a 500', () => {
    const cases: Array<[string, unknown, number, RegExp]> = [
      ['neither template nor prompt', { fidelity: 2 }, 422, /template/],
      ['an unknown template', { template: 'atlantis' }, 422, /no template atlantis/],
      ['fidelity 0', { template: 'athens-war-council', fidelity: 0 }, 422, /fidelity/],
      ['fidelity 6', { template: 'athens-war-council', fidelity: 6 }, 422, /fidelity/],
      ['fidelity 2.5', { template: 'athens-war-council', fidelity: 2.5 }, 422, /fidelity/],
      ['fidelity as a string', { template: 'athens-war-council', fidelity: '3' }, 422, /fidelity/],
      ['an unknown mode', { template: 'athens-war-council', mode: 'SIDEWAYS' }, 422, /mode/],
      ['an unknown mechanism', { template: 'athens-war-council', mechanisms: ['M20'] }, 422, /mechanisms/],
      ['a repeated mechanism', { template: 'athens-war-council', mechanisms: ['M3', 'M3'] }, 422, /repeat/],
      ['mechanisms not a list', { template: 'athens-war-council', mechanisms: 'M3' }, 422, /mechanisms/],
      ['a prompt too short', { prompt: 'hi' }, 422, /prompt/],
      ['a prompt too long', { prompt: 'x'.repeat(4001) }, 422, /prompt/],
      ['an unknown field', { template: 'athens-war-council', colour: 'red' }, 422, /colour|unrecognized/i],
      ['temperature out of range', { template: 'athens-war-council', llm_params: { temperature: 3 } }, 422, /temperature/],
      ['five stop sequences', { template: 'athens-war-council', llm_params: { stop: ['a', 'b', 'c', 'd', 'e'] } }, 422, /stop/],
      ['max_tokens 0', { template: 'athens-war-council', llm_params: { max_tokens: 0 } }, 422, /max_tokens/],
      ['a model without a price', { template: 'athens-war-council', text_model: 'acme/unpriced-1' }, 422, /price table/],
      ['max_cost_usd above a dollar', { template: 'athens-war-council', max_cost_usd: 1.5 }, 422, /max_cost_usd/],
      ['a wait beyond the maximum', { template: 'athens-war-council' }, 422, /wait/],
    ];
    for (const [name, body, status, detail] of cases) {
      it(name, async () => {
        const path = name.startsWith('a wait') ? '/api/v1/simulate?wait=61' : '/api/v1/simulate';
        const reply = await sim.call('POST', path, { headers: asUser('validator'), body });
        assert.equal(reply.status, status, JSON.stringify(reply.body));
        assert.match(reply.headers.get('content-type') ?? '', /application\/problem\+json/);
        assert.match(JSON.stringify(reply.body), detail);
      });
    }
    it('malformed JSON, the wrong content type, and unknown ids', async () => {
      assert.equal(
        (await sim.call('POST', '/api/v1/simulate', { headers: { ...asUser('validator'), 'content-type': 'application/json' }, raw: '{"template":' })).status,
        400,
      );
      assert.equal(
        (await sim.call('POST', '/api/v1/simulate', { headers: { ...asUser('validator'), 'content-type': 'text/plain' }, raw: 'template=x' })).status,
        415,
      );
      assert.equal((await sim.call('GET', '/api/v1/simulations/not-a-uuid', { headers: asUser('validator') })).status, 422);
      assert.equal((await sim.call('GET', '/api/v1/simulations/00000000-0000-4000-8000-000000000000', { headers: asUser('validator') })).status, 404);
      assert.equal((await sim.call('GET', '/api/v1/simulations?limit=0', { headers: asUser('validator') })).status, 422);
      assert.equal((await sim.call('GET', '/api/v1/simulations?status=sleeping', { headers: asUser('validator') })).status, 422);
    });
  });

  describe('credentials', () => {
    it('needs one, and refuses wrong ones with 401', async () => {
      const none = await sim.call('POST', '/api/v1/simulate', { body: { template: 'athens-war-council' } });
      assert.equal(none.status, 401);
      assert.ok(none.headers.get('www-authenticate'));
      assert.equal((await sim.call('GET', '/api/v1/simulations', { headers: { 'X-Service-Key': 'wrong-key-0123456789' } })).status, 401);
      assert.equal((await sim.call('GET', '/api/v1/simulations', { headers: { 'X-API-Key': 'wrong-key-0123456789' } })).status, 401);
      const userAlone = await sim.call('GET', '/api/v1/simulations', { headers: { 'X-User-ID': 'someone' } });
      assert.equal(userAlone.status, 401);
      assert.match(userAlone.body.detail, /only with X-Service-Key/);
      assert.equal((await sim.call('GET', '/api/v1/simulations', { headers: { ...service, 'X-User-ID': 'bad id with spaces' } })).status, 401);
      assert.equal((await sim.call('GET', '/api/v1/simulations', { headers: { Authorization: 'Basic abc' } })).status, 401);
    });

    it('the simulation API key reads, but a start is paid and goes through the gateway: 403, no run', async () => {
      const refused = await sim.call('POST', '/api/v1/simulate?wait=30', { headers: apiKey, body: { template: 'athens-war-council', fidelity: 1 } });
      assert.equal(refused.status, 403, JSON.stringify(refused.body));
      assert.match(refused.headers.get('content-type') ?? '', /application\/problem\+json/);
      assert.match(refused.body.detail, /paid: start it through the gateway at http:\/\/127\.0\.0\.1:8080\/api\/v1\/simulate/);
      assert.match(refused.body.detail, /simulation API key/);
      const mine = await sim.call('GET', '/api/v1/simulations', { headers: apiKey });
      assert.equal(mine.status, 200);
      assert.equal(mine.body.total, 0, 'nothing was started');
      assert.equal((await sim.call('GET', '/api/v1/simulate/templates', { headers: apiKey })).status, 200);
      const theirs = await sim.run({ template: 'athens-war-council', fidelity: 1 }, 'someone-else', 0);
      assert.equal((await sim.call('GET', `/api/v1/simulations/${theirs.body.id}`, { headers: apiKey })).status, 404, "another's run is not the key's to read");
    });

    it('a service key, for a user or acting as itself, starts runs: the gateway and the conductor charged them first', async () => {
      assert.equal(
        (await sim.call('POST', '/api/v1/simulate', { headers: asUser('charged-user'), body: { template: 'athens-war-council', fidelity: 1 } })).status,
        202,
      );
      assert.equal((await sim.call('POST', '/api/v1/simulate', { headers: service, body: { template: 'athens-war-council', fidelity: 1 } })).status, 202);
    });

    it('documents the refusal of unpaid starts in /openapi.json', async () => {
      const operation = (await sim.call('GET', '/openapi.json')).body.paths['/api/v1/simulate'].post;
      assert.match(operation.responses['403'].description, /paid, through the gateway/);
      assert.match(operation.description, /simulation API key may read runs but not start one/);
    });
  });

  describe('a run', () => {
    let run: any;
    before(async () => {
      const reply = await sim.call('POST', '/api/v1/simulate', { headers: asUser('alice'), body: { template: 'constitutional-convention', fidelity: 2 } });
      assert.equal(reply.status, 202, JSON.stringify(reply.body));
      run = reply.body;
    });

    it('answers 202 at once with its estimate, its maximum and where to follow it', () => {
      assert.ok(['queued', 'running', 'completed'].includes(run.status));
      assert.equal(run.status_url, `/api/v1/simulations/${run.id}`);
      assert.equal(run.links.events, `/api/v1/simulations/${run.id}/events`);
      assert.ok(run.estimate.usd >= 0.15 && run.estimate.usd <= 1);
      assert.equal(run.cost.max_usd, run.estimate.usd);
      assert.equal(run.progress.steps_total, 5);
    });

    it('reports every step as it completed, then its result, cost and tokens', async () => {
      await sim.instance.simulations.waitFor(run.id, 30_000);
      const status = await sim.call('GET', `/api/v1/simulations/${run.id}`, { headers: asUser('alice') });
      assert.equal(status.body.status, 'completed');
      assert.deepEqual(status.body.progress, { steps_done: 5, steps_total: 5, percent: 100 });
      assert.deepEqual(
        status.body.steps.map((step: any) => step.seq),
        [0, 1, 2, 3, 4],
      );
      assert.ok(status.body.steps.every((step: any) => step.kind === 'timepoint' && step.cost_usd > 0));
      const result = await sim.result(run.id, 'alice');
      assert.equal(result.timepoints.length, 5);
      assert.ok(result.cost.actual_usd > 0 && result.cost.actual_usd <= result.cost.max_usd);
      assert.equal(result.cost.tokens.total, result.cost.tokens.input + result.cost.tokens.output);
      assert.ok(result.models.every((model: any) => model.offline === true && /offline provider/.test(model.note)));
      assert.ok(result.confidence.run > 0 && result.confidence.run <= 1);
      assert.equal(result.partial, null);
      const summed = status.body.steps.reduce((sum: number, step: any) => sum + step.cost_usd, 0);
      assert.ok(Math.abs(summed - result.cost.actual_usd) < 1e-9, 'the steps add up to the run');
    });

    it('is listed for its owner only, in the list envelope', async () => {
      const mine = await sim.call('GET', '/api/v1/simulations?limit=5', { headers: asUser('alice') });
      assert.equal(mine.body.limit, 5);
      assert.equal(mine.body.offset, 0);
      assert.ok(mine.body.total >= 1);
      assert.ok(mine.body.items.some((item: any) => item.id === run.id));
      const other = await sim.call('GET', '/api/v1/simulations', { headers: asUser('bob') });
      assert.ok(!other.body.items.some((item: any) => item.id === run.id));
      assert.equal((await sim.call('GET', `/api/v1/simulations/${run.id}/result`, { headers: asUser('bob') })).status, 404);
    });

    it('exports TDF whose hash is reproducible from its payload', async () => {
      const first = await sim.call('GET', `/api/v1/simulations/${run.id}/result?format=tdf`, { headers: asUser('alice') });
      const second = await sim.call('GET', `/api/v1/simulations/${run.id}/result?format=tdf`, { headers: asUser('alice') });
      assert.equal(first.status, 200);
      assert.equal(first.body.id, `simulation:${run.id}`);
      assert.equal(first.body.source, 'tempora-simulation');
      assert.equal(first.body.version, '1.0');
      assert.equal(first.body.tdf_hash, tdfHash(first.body.payload));
      assert.equal(first.body.tdf_hash, second.body.tdf_hash);
      assert.equal(canonicalJson(first.body), canonicalJson(second.body));
      assert.ok(first.body.entity_ids.includes('figure:james-madison'));
      assert.equal((await sim.call('GET', `/api/v1/simulations/${run.id}/result?format=xml`, { headers: asUser('alice') })).status, 422);
    });

    it('cannot be cancelled once it has ended', async () => {
      const reply = await sim.call('POST', `/api/v1/simulations/${run.id}/cancel`, { headers: asUser('alice') });
      assert.equal(reply.status, 409);
    });
  });

  it('a prompt alone plans its own scenario first', async () => {
    const reply = await sim.run({ prompt: 'Caesar weighs crossing the Rubicon while Pompey rallies the Senate in Rome.', fidelity: 1 }, 'prompter');
    assert.equal(reply.body.status, 'completed', JSON.stringify(reply.body));
    const status = await sim.call('GET', `/api/v1/simulations/${reply.body.id}`, { headers: asUser('prompter') });
    assert.equal(status.body.steps[0].kind, 'plan');
    const result = await sim.result(reply.body.id, 'prompter');
    assert.ok(result.entities.some((entity: any) => entity.name === 'Caesar'));
    assert.equal(result.timepoints.length, 5);
  });
});
