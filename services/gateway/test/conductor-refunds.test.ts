import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { createServer, request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { type RunningServer, serve } from '@tempora/kit/http';
import { createLogger } from '@tempora/kit/observability';
import { loadConfig } from '@tempora/kit/runtime';
import { createDatabase, dropDatabase } from '../../../test/support/database.ts';
import { request } from '../../../test/support/http.ts';
import { documentedRun } from '../../../test/support/stand-ins/simulation-run.ts';
import { waitFor } from '../../../test/support/wait.ts';
import { ConductorConfigSchema } from '../../conductor/src/config.ts';
import { type ConductorInstance, createConductorService } from '../../conductor/src/service.ts';
import { type GatewayHarness, SERVICE_KEY, type SignedIn, service, useGateway } from './harness.ts';

const CONDUCTOR_KEY = 'conductor-own-service-key-0123456789';
const SIMULATE = 'Simulate what would have happened had the Continental System failed in 1807';
/** The price of a fidelity-3 run (the default fidelity), whichever way it is started. */
const RUN = 8;
const SIGNUP = 50;

interface Entry {
  id: string;
  kind: string;
  amount: number;
  idempotency_key: string;
  refund_of: string | null;
}

/**
 * Same operation, same refunds, whichever way in: a simulation run the conductor's `start_simulation`
 * started is settled by the gateway's charged-jobs follower exactly as a run started through the proxy,
 * and a conductor turn whose paid tools all failed is net zero in the ledger. On every failure path the
 * ledger is compared with the conductor's `tools_called` (the reply's, then the conversation's once the
 * run has ended) and with the same run started through the proxy.
 */
describe('gateway: runs the conductor started are refunded as proxied runs are', function () {
  this.timeout(60_000);
  let gw: GatewayHarness;
  let conductor: { url: string; instance: ConductorInstance; server: RunningServer; database: string };
  /** Between the conductor and the gateway: refuses `/credits/follow` while `refuseFollow` > 0 (the gateway unreachable for it). */
  let relay: { server: Server; url: string; refuseFollow: number; follows: number };
  /** The simulation stand-in's runs: status and steps done, by id. */
  const runs = new Map<string, { status: string; steps_done: number }>();
  let startStatus = 202;

  // Before the gateway's own (hooks run in the order they are declared): the conductor goes first.
  after(async () => {
    await conductor?.server.close();
    if (conductor) await dropDatabase(conductor.database);
    await new Promise((resolve) => relay?.server.close(resolve));
  });
  useGateway(
    async (started) => {
      gw = started;
      relay = await startRelay(gw.url);
      conductor = await startConductor(relay.url, gw.upstreams.simulation.url);
    },
    { env: { CHARGED_JOB_CHECK_MS: '50' } },
  );

  beforeEach(() => {
    startStatus = 202;
    relay.refuseFollow = 0;
    simulationStandIn();
  });

  /** The simulation service's API as the stand-in answers it (docs/simulation.md): start, read, cancel. */
  function simulationStandIn(): void {
    const upstream = gw.upstreams.simulation;
    upstream.reset();
    upstream.on('POST /api/v1/simulate', (_req, res) => {
      if (startStatus !== 202)
        return void res
          .writeHead(startStatus, { 'content-type': 'application/problem+json' })
          .end(JSON.stringify({ type: 'about:blank', status: startStatus, title: 'refused', detail: 'the stand-in refuses this run' }));
      const id = randomUUID();
      runs.set(id, { status: 'queued', steps_done: 0 });
      res
        .writeHead(202, { 'content-type': 'application/json', location: `/api/v1/simulations/${id}` })
        .end(JSON.stringify({ ...documentedRun(id, {}), status_url: `/api/v1/simulations/${id}` }));
    });
    upstream.on('POST /api/v1/simulations/*', (req, res) => {
      const id = /\/simulations\/([^/]+)\/cancel$/.exec(req.url ?? '')?.[1] ?? '';
      const run = runs.get(id);
      if (!run) return void res.writeHead(404, { 'content-type': 'application/problem+json' }).end('{"status":404}');
      run.status = 'cancelled';
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ ...documentedRun(id, {}), ...run }));
    });
    upstream.on('GET /api/v1/simulations/*', (req, res) => {
      const id = /\/simulations\/([^/?]+)/.exec(req.url ?? '')?.[1] ?? '';
      const run = runs.get(id);
      if (!run) return void res.writeHead(404, { 'content-type': 'application/problem+json' }).end('{"status":404}');
      res.writeHead(200, { 'content-type': 'application/json' }).end(
        JSON.stringify({
          ...documentedRun(id, {}),
          status: run.status,
          progress: { steps_done: run.steps_done, steps_total: 5, percent: run.steps_done * 20 },
        }),
      );
    });
  }

  const end = (id: string, status: string, steps_done = 0) => runs.set(id, { status, steps_done });
  const ask = (user: SignedIn, content = SIMULATE) =>
    request<any>(conductor.url, '/api/v1/conductor/messages', { method: 'POST', headers: user.headers, body: { content } });
  const conversation = (user: SignedIn, id: string) => request<any>(conductor.url, `/api/v1/conductor/conversations/${id}`, { headers: user.headers });
  const proxied = (user: SignedIn) =>
    gw.call('POST', '/api/v1/simulate', {
      headers: user.headers,
      body: { prompt: 'What if the Continental System had failed in 1807?', mode: 'BRANCHING', fidelity: 3 },
    });

  async function ledger(user: SignedIn): Promise<Entry[]> {
    const history = await gw.call('GET', '/api/v1/credits/history?limit=100', { headers: user.headers });
    assert.equal(history.status, 200);
    return history.body.items as Entry[];
  }

  /** The ledger once the balance is `balance`, checked to sum to it. */
  async function settledLedger(user: SignedIn, balance: number): Promise<Entry[]> {
    const { ledger: repository } = gw.instance.repository;
    await waitFor(`a balance of ${balance}`, async () => (await repository.balance(user.userId)) === balance, { intervalMs: 25 }).catch(async (error: Error) =>
      assert.fail(`${error.message}: ${JSON.stringify(await ledger(user))}`),
    );
    assert.equal(await repository.ledgerSum(user.userId), balance, 'the ledger sums to the balance');
    return ledger(user);
  }

  /** Credits the ledger holds against each call of a conductor message (charges net of refunds), by call index. */
  function netByCall(entries: Entry[], messageId: string): Map<number, number> {
    const net = new Map<number, number>();
    for (const entry of entries) {
      const index = new RegExp(`conductor:${messageId}:(\\d+)$`).exec(entry.idempotency_key)?.[1];
      if (index !== undefined) net.set(Number(index), (net.get(Number(index)) ?? 0) - entry.amount);
    }
    return net;
  }

  /** Each paid call of `calls` costs in the ledger what it says, and no other call of the message is in the ledger. */
  function assertLedgerMatches(entries: Entry[], messageId: string, calls: Array<{ index: number; credits: number }>): void {
    const net = netByCall(entries, messageId);
    for (const call of calls) assert.equal(net.get(call.index) ?? 0, call.credits, `call ${call.index}: the ledger and tools_called agree`);
    for (const index of net.keys())
      assert.ok(
        calls.some((call) => call.index === index),
        `call ${index} is in tools_called`,
      );
  }

  /** The conversation once the conductor's journal shows the run's call with `credits`. */
  async function conversationWhen(user: SignedIn, reply: any, credits: number) {
    return waitFor(
      `the conversation to show the run at ${credits} credits`,
      async () => {
        const found = (await conversation(user, reply.conversation_id)).body;
        const call = found.messages[0].tools_called.find((candidate: { tool: string }) => candidate.tool === 'start_simulation');
        return call?.credits === credits && { message: found.messages[0], call };
      },
      { intervalMs: 25 },
    );
  }

  /** The run the conductor's reply started: its call and the run id. */
  function startedRun(reply: any) {
    const call = reply.tools_called.find((candidate: { tool: string }) => candidate.tool === 'start_simulation');
    assert.ok(call, JSON.stringify(reply.tools_called));
    return { call, id: call.output?.id as string };
  }

  it('a run that fails at once: refunded at once, the reply and the ledger say 0, as through the proxy', async () => {
    startStatus = 503;
    const user = await gw.user();
    const reply = await ask(user);
    assert.equal(reply.status, 200, JSON.stringify(reply.body));
    const { call } = startedRun(reply.body);
    assert.equal(call.status, 'failed');
    assert.equal(call.credits, 0);
    assert.equal(reply.body.spend.credits_total, 0, 'the turn is net zero');
    const entries = await settledLedger(user, SIGNUP);
    assertLedgerMatches(entries, reply.body.message_id, reply.body.tools_called);
    assert.deepEqual(
      entries.map((entry) => [entry.kind, entry.amount]),
      [
        ['refund', RUN],
        ['charge', -RUN],
        ['signup_grant', SIGNUP],
      ],
    );

    const other = await gw.user();
    assert.equal((await proxied(other)).status, 503);
    const through = await settledLedger(other, SIGNUP);
    assert.deepEqual(
      through.map((entry) => [entry.kind, entry.amount]),
      entries.map((entry) => [entry.kind, entry.amount]),
      'the same entries as through the proxy',
    );
  });

  it('a run that fails later: the gateway refunds it, and the conversation shows it refunded, as through the proxy', async () => {
    const user = await gw.user();
    const reply = await ask(user);
    assert.equal(reply.status, 200, JSON.stringify(reply.body));
    const { call, id } = startedRun(reply.body);
    assert.equal(call.status, 'ok');
    assert.equal(call.credits, RUN);
    assertLedgerMatches(await settledLedger(user, SIGNUP - RUN), reply.body.message_id, reply.body.tools_called);
    const standing = await gw.call('GET', `/api/v1/credits/standing?user_id=${user.userId}&idempotency_key=conductor:${reply.body.message_id}:${call.index}`, {
      headers: service,
    });
    assert.deepEqual(standing.body, { state: 'following', charged: RUN, refunded: 0, reason: null });

    end(id, 'failed');
    const entries = await settledLedger(user, SIGNUP);
    const { message, call: settled } = await conversationWhen(user, reply.body, 0);
    assert.equal(settled.status, 'failed');
    assert.match(settled.note, /the job failed: refunded 8 credits/);
    assertLedgerMatches(entries, reply.body.message_id, message.tools_called);
    assert.equal(
      [...netByCall(entries, reply.body.message_id).values()].reduce((sum, credits) => sum + credits, 0),
      0,
      'the turn is net zero',
    );

    const other = await gw.user();
    const started = await proxied(other);
    assert.equal(started.status, 202);
    await settledLedger(other, SIGNUP - RUN);
    end(started.body.id, 'failed');
    const through = await settledLedger(other, SIGNUP);
    assert.deepEqual(
      through.map((entry) => [entry.kind, entry.amount]),
      entries.map((entry) => [entry.kind, entry.amount]),
      'the same entries as through the proxy',
    );
  });

  it('a run cancelled before a step is refunded, one cancelled after steps keeps its charge, as through the proxy', async () => {
    const user = await gw.user();
    const reply = (await ask(user)).body;
    const { id } = startedRun(reply);
    // The user cancels the run through the gateway, as the conductor's reply lets them.
    assert.equal((await gw.call('POST', `/api/v1/simulations/${id}/cancel`, { headers: user.headers })).status, 200);
    const entries = await settledLedger(user, SIGNUP);
    const { message, call } = await conversationWhen(user, reply, 0);
    assert.match(call.note, /cancelled before it delivered anything: refunded 8 credits/);
    assertLedgerMatches(entries, reply.message_id, message.tools_called);

    const partial = await gw.user();
    const kept = (await ask(partial)).body;
    const run = startedRun(kept);
    end(run.id, 'cancelled', 2);
    const key = `conductor:${kept.message_id}:${run.call.index}`;
    await waitFor(
      'the charge to stand',
      async () =>
        (await gw.call('GET', `/api/v1/credits/standing?user_id=${partial.userId}&idempotency_key=${key}`, { headers: service })).body.state === 'stands',
      { intervalMs: 25 },
    );
    await conductor.instance.service.settleUnsettled('test');
    const after = await conversationWhen(partial, kept, RUN);
    assert.equal(after.call.status, 'ok');
    assertLedgerMatches(await settledLedger(partial, SIGNUP - RUN), kept.message_id, after.message.tools_called);

    const other = await gw.user();
    const started = await proxied(other);
    assert.equal((await gw.call('POST', `/api/v1/simulations/${started.body.id}/cancel`, { headers: other.headers })).status, 200);
    const through = await settledLedger(other, SIGNUP);
    assert.deepEqual(
      through.map((entry) => [entry.kind, entry.amount]),
      entries.map((entry) => [entry.kind, entry.amount]),
      'the same entries as through the proxy',
    );
  });

  it('a run the gateway could not take at first is handed over later, and refunded when it fails', async () => {
    relay.refuseFollow = 1;
    const follows = relay.follows;
    const user = await gw.user();
    const reply = (await ask(user)).body;
    const { call, id } = startedRun(reply);
    assert.equal(call.credits, RUN);
    // The hand-over at request time was refused; the settler (every 50 ms here) may have taken its turn already.
    assert.equal(relay.refuseFollow, 0, 'the first hand-over was refused');
    assert.ok(relay.follows >= follows + 1, 'handed over while answering');
    await waitFor('the settler to hand it over', () => relay.follows >= follows + 2, { intervalMs: 25 });
    assert.equal(relay.follows, follows + 2, 'the settler handed it over');
    end(id, 'failed');
    const entries = await settledLedger(user, SIGNUP);
    const { message } = await conversationWhen(user, reply, 0);
    assertLedgerMatches(entries, reply.message_id, message.tools_called);
  });

  describe('the service routes', () => {
    async function charged(user: SignedIn): Promise<string> {
      const key = `test:${randomBytes(6).toString('hex')}`;
      const reply = await gw.call('POST', '/api/v1/credits/charge', {
        headers: service,
        body: { user_id: user.userId, amount: RUN, operation: 'simulation.fidelity-3', idempotency_key: key },
      });
      assert.equal(reply.status, 201);
      return key;
    }
    const follow = (body: Record<string, unknown>, headers: Record<string, string> = service) => gw.call('POST', '/api/v1/credits/follow', { headers, body });

    it('refuses bad input (422), unknown charges (404) and callers without the service key', async () => {
      const user = await gw.user();
      const key = await charged(user);
      for (const location of [
        '/api/v1/../admin',
        '/api/v1/simulations/../x',
        'http://elsewhere/api/v1/simulations/1',
        '/internal/x',
        '/api/v1/simulations/a%2e%2e',
        '/api/v1/simulations/1?x=1',
      ]) {
        assert.equal((await follow({ user_id: user.userId, idempotency_key: key, upstream: 'simulation', location })).status, 422, location);
      }
      assert.equal((await follow({ user_id: user.userId, idempotency_key: key, upstream: 'billing', location: '/api/v1/x' })).status, 422);
      assert.equal((await follow({ user_id: 'someone', idempotency_key: key, upstream: 'simulation', location: '/api/v1/simulations/1' })).status, 422);
      assert.equal(
        (await follow({ user_id: user.userId, idempotency_key: 'never-charged', upstream: 'simulation', location: '/api/v1/simulations/1' })).status,
        404,
      );
      assert.equal((await gw.call('GET', `/api/v1/credits/standing?user_id=${user.userId}&idempotency_key=never-charged`, { headers: service })).status, 404);
      assert.equal((await gw.call('GET', `/api/v1/credits/standing?user_id=${user.userId}`, { headers: service })).status, 422);
      assert.equal(
        (await follow({ user_id: user.userId, idempotency_key: key, upstream: 'simulation', location: '/api/v1/simulations/1' }, user.headers)).status,
        403,
      );
      assert.equal((await follow({ user_id: user.userId, idempotency_key: key, upstream: 'simulation', location: '/api/v1/simulations/1' }, {})).status, 401);
    });

    it('follows a charge once, and never one already refunded', async () => {
      const user = await gw.user();
      const key = await charged(user);
      const id = randomUUID();
      runs.set(id, { status: 'running', steps_done: 1 });
      const body = { user_id: user.userId, idempotency_key: key, upstream: 'simulation', location: `/api/v1/simulations/${id}` };
      for (let i = 0; i < 2; i += 1) {
        const reply = await follow(body);
        assert.equal(reply.status, 202);
        assert.deepEqual(reply.body, { state: 'following', charged: RUN, refunded: 0, reason: null });
      }
      end(id, 'completed', 5);
      await waitFor(
        'the charge to stand',
        async () =>
          (await gw.call('GET', `/api/v1/credits/standing?user_id=${user.userId}&idempotency_key=${key}`, { headers: service })).body.state === 'stands',
        { intervalMs: 25 },
      );
      assert.equal((await gw.call('GET', `/api/v1/credits/standing?user_id=${user.userId}&idempotency_key=${key}`, { headers: service })).body.state, 'stands');
      assert.equal(await gw.instance.repository.ledger.balance(user.userId), SIGNUP - RUN);

      const refundedKey = await charged(user);
      assert.equal(
        (await gw.call('POST', '/api/v1/credits/refund', { headers: service, body: { user_id: user.userId, idempotency_key: refundedKey } })).status,
        200,
      );
      const refused = await follow({ ...body, idempotency_key: refundedKey });
      assert.equal(refused.status, 200);
      assert.deepEqual(refused.body, { state: 'refunded', charged: RUN, refunded: RUN, reason: 'refund' });
    });
  });

  async function startConductor(gatewayUrl: string, simulationUrl: string) {
    const database = await createDatabase('conductor');
    const nowhere = `http://127.0.0.1:${await unusedPort()}`;
    const config = loadConfig(ConductorConfigSchema, {
      PORT: '0',
      DATABASE_URL: database,
      REDIS_URL: process.env.REDIS_URL,
      REDIS_KEY_PREFIX: `test-${randomBytes(4).toString('hex')}`,
      SERVICE_KEY: CONDUCTOR_KEY,
      LOG_LEVEL: 'silent',
      GATEWAY_URL: gatewayUrl,
      GATEWAY_SERVICE_KEY: SERVICE_KEY,
      GRAPH_URL: nowhere,
      GENERATION_URL: nowhere,
      SIMULATION_URL: simulationUrl,
      CONDUCTOR_RATE_LIMIT_FREE: '100000',
      INTROSPECTION_CACHE_MS: '0',
      PEER_TIMEOUT_MS: '5000',
      REFUND_RETRY_MS: '50',
    });
    const instance = await createConductorService(config, createLogger('conductor', 'silent'));
    const server = await serve(instance.app, {
      port: 0,
      host: '127.0.0.1',
      logger: instance.logger,
      graceMs: 500,
      onDrain: instance.drain,
      onClose: [instance.close],
    });
    return { url: server.url, instance, server, database };
  }
});

async function unusedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** A relay in front of the gateway that can refuse the conductor's hand-overs, counting them. */
async function startRelay(target: string): Promise<{ server: Server; url: string; refuseFollow: number; follows: number }> {
  const relay = { server: undefined as unknown as Server, url: '', refuseFollow: 0, follows: 0 };
  const upstream = new URL(target);
  relay.server = createServer((req, res) => {
    if (req.method === 'POST' && req.url === '/api/v1/credits/follow') {
      relay.follows += 1;
      if (relay.refuseFollow > 0) {
        relay.refuseFollow -= 1;
        req.resume();
        return void res.writeHead(503, { 'content-type': 'application/problem+json' }).end('{"status":503,"title":"unavailable"}');
      }
    }
    const forwarded = httpRequest({ hostname: upstream.hostname, port: upstream.port, path: req.url, method: req.method, headers: req.headers }, (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    });
    forwarded.on('error', () => res.destroy());
    req.pipe(forwarded);
  });
  await new Promise<void>((resolve) => relay.server.listen(0, '127.0.0.1', resolve));
  relay.url = `http://127.0.0.1:${(relay.server.address() as AddressInfo).port}`;
  return relay;
}
