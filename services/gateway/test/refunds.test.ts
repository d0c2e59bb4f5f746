import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import { waitFor } from '../../../test/support/wait.ts';
import { type GatewayHarness, pausedRequest, type SignedIn, useGateway } from './harness.ts';

/**
 * Every way a charged call can fail to deliver what was paid for, each followed by an audit of the
 * caller's ledger: the charge and its refund (or the charge alone when it delivered), a ledger that sums
 * to the balance, and nothing left pending.
 */
describe('gateway: a charged call that does not deliver is refunded', function () {
  this.timeout(30_000);
  let gw: GatewayHarness;
  useGateway(
    (started) => {
      gw = started;
    },
    { env: { CHARGED_JOB_CHECK_MS: '50' }, resetUpstreams: true },
  );

  const SIGNUP = 50;
  const BALANCED = 2;

  interface Entry {
    id: string;
    kind: string;
    amount: number;
    refund_of: string | null;
  }

  /** The ledger once it has settled to `balance` (refunds after a response has ended are awaited). */
  async function ledgerAt(user: SignedIn, balance: number): Promise<Entry[]> {
    const { ledger: repository } = gw.instance.repository;
    await waitFor(`a balance of ${balance}`, async () => (await repository.balance(user.userId)) === balance, { timeoutMs: 5_000, intervalMs: 25 }).catch(
      () => {
        // The assertion below names the ledger the balance stopped at.
      },
    );
    const history = await gw.call('GET', '/api/v1/credits/history', { headers: user.headers });
    assert.equal(history.status, 200);
    assert.equal(await repository.balance(user.userId), balance, `the balance settles at ${balance}: ${JSON.stringify(history.body.items)}`);
    assert.equal(await repository.ledgerSum(user.userId), balance, 'the ledger sums to the balance');
    return history.body.items as Entry[];
  }

  /** One charge of `price`, refunded once, and the balance back where it was. */
  async function assertRefunded(user: SignedIn, price = BALANCED): Promise<void> {
    const [refund, charge, grant] = await ledgerAt(user, SIGNUP);
    assert.deepEqual([refund?.kind, charge?.kind, grant?.kind], ['refund', 'charge', 'signup_grant']);
    assert.equal(charge!.amount, -price);
    assert.equal(refund!.amount, price);
    assert.equal(refund!.refund_of, charge!.id, 'the refund compensates that charge');
  }

  /** One charge of `price` that stands. */
  async function assertCharged(user: SignedIn, price = BALANCED): Promise<void> {
    const entries = await ledgerAt(user, SIGNUP - price);
    assert.deepEqual(
      entries.map((entry) => entry.kind),
      ['charge', 'signup_grant'],
    );
  }

  const generate = (user: SignedIn, path: string) =>
    gw.call('POST', `/api/v1/timepoints/${path}`, { headers: user.headers, body: { query: 'The fall of Constantinople, 1453' } });

  function sse(res: ServerResponse, ...events: string[]): void {
    res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' });
    for (const event of events) res.write(event);
  }
  const START = 'id: 1\nevent: start\ndata: {"query":"x"}\n\n';
  const AGENT = 'id: 2\nevent: agent\ndata: {"agent":"Judge","status":"completed"}\n\n';

  describe('sync', () => {
    it('refunds an upstream failure (5xx) and a refused input (4xx)', async () => {
      for (const status of [500, 422]) {
        const user = await gw.user();
        gw.upstreams.generation.on('POST /api/v1/timepoints/generate/sync', (_req, res) => {
          res.writeHead(status, { 'content-type': 'application/problem+json' }).end(JSON.stringify({ status, title: 'no scene' }));
        });
        const reply = await generate(user, 'generate/sync');
        assert.equal(reply.status, status);
        assert.equal(reply.headers.get('x-credits-charged'), '0');
        await assertRefunded(user);
      }
    });
    it('keeps the charge of a scene delivered', async () => {
      const user = await gw.user();
      const reply = await generate(user, 'generate/sync');
      assert.equal(reply.status, 200);
      await assertCharged(user);
    });
  });

  describe('stream', () => {
    it('refunds a stream that ends in an error event', async () => {
      const user = await gw.user();
      gw.upstreams.generation.on('POST /api/v1/timepoints/generate/stream', (_req, res) => {
        sse(res, START, AGENT, `id: 3\nevent: error\ndata: ${JSON.stringify({ status: 422, detail: 'query: must not contain a NUL character' })}\n\n`);
        res.end();
      });
      const reply = await generate(user, 'generate/stream');
      assert.equal(reply.status, 200, 'the stream had started');
      assert.equal(reply.headers.get('x-credits-charged'), String(BALANCED), 'its head was sent before the outcome was known');
      assert.match(reply.body, /event: error/, 'the stream passes unchanged');
      // The response ends only once the refund is booked: no waiting needed.
      assert.equal(await gw.instance.repository.ledger.balance(user.userId), SIGNUP);
      await assertRefunded(user);
    });
    it('refunds a stream that ends without its done event', async () => {
      const user = await gw.user();
      gw.upstreams.generation.on('POST /api/v1/timepoints/generate/stream', (_req, res) => {
        sse(res, START, AGENT);
        res.end();
      });
      assert.equal((await generate(user, 'generate/stream')).status, 200);
      await assertRefunded(user);
    });
    it('keeps the charge of a stream that delivered its done event', async () => {
      const user = await gw.user();
      gw.upstreams.generation.on('POST /api/v1/timepoints/generate/stream', (_req, res) => {
        sse(res, START, AGENT, 'id: 3\nevent: done\ndata: {"id":"scene-1"}\n\n');
        res.end();
      });
      assert.equal((await generate(user, 'generate/stream')).status, 200);
      await assertCharged(user);
    });
  });

  describe('async', () => {
    /** The generation service's job resource, as its routes answer it. */
    function jobs(states: Record<string, string[]>): void {
      gw.upstreams.generation.on('POST /api/v1/timepoints/generate', (_req, res) => {
        const id = randomUUID();
        states[id] = [...states.next!];
        res
          .writeHead(202, { 'content-type': 'application/json', location: `/api/v1/timepoints/jobs/${id}` })
          .end(JSON.stringify({ job_id: id, status: 'queued' }));
      });
      gw.upstreams.generation.on('GET /api/v1/timepoints/jobs/*', (req, res) => {
        const id = (req.url ?? '').split('/').pop()!;
        const seen = states[id];
        if (!seen || seen[0] === 'gone') return void res.writeHead(404, { 'content-type': 'application/problem+json' }).end('{"status":404}');
        const status = seen.length > 1 ? seen.shift()! : seen[0]!;
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ job_id: id, status }));
      });
    }
    /** Waits until the gateway has stopped following the user's jobs. */
    async function followed(user: SignedIn): Promise<void> {
      const knex = gw.instance.knex;
      await waitFor('no job left followed', async () => (await knex('charged_jobs').where({ user_id: user.userId })).length === 0, {
        timeoutMs: 5_000,
        intervalMs: 25,
      }).catch(() => {
        // The assertion below names the rows left.
      });
      assert.deepEqual(await knex('charged_jobs').where({ user_id: user.userId }), [], 'no job is left followed');
    }

    it('refunds a job that fails after it was accepted, and asks for it as the user with the upstream key', async () => {
      const user = await gw.user();
      jobs({ next: ['queued', 'running', 'failed'] });
      const reply = await generate(user, 'generate');
      assert.equal(reply.status, 202);
      assert.equal(reply.headers.get('x-credits-charged'), String(BALANCED), 'charged when accepted');
      await followed(user);
      await assertRefunded(user);
      const checks = gw.upstreams.generation.requests.filter((seen) => seen.method === 'GET');
      assert.ok(checks.length >= 3, `asked until it ended (${checks.length} times)`);
      assert.equal(checks[0]!.headers['x-user-id'], user.userId);
      assert.equal(checks[0]!.headers['x-service-key'], 'upstream-service-key-0123456789');
    });
    it('refunds a job its upstream no longer knows', async () => {
      const user = await gw.user();
      jobs({ next: ['gone'] });
      assert.equal((await generate(user, 'generate')).status, 202);
      await followed(user);
      await assertRefunded(user);
    });
    it('keeps the charge of a job that completed', async () => {
      const user = await gw.user();
      jobs({ next: ['running', 'completed'] });
      assert.equal((await generate(user, 'generate')).status, 202);
      await followed(user);
      await assertCharged(user);
    });
    describe('simulation runs (docs/gateway.md: a run that delivered a partial result keeps its charge)', () => {
      /** Fidelity 3, the default: 8 credits (docs/gateway.md, Credits). */
      const SIMULATION = 8;
      /** The simulation service's run resource: its status, then its end with `steps_done` completed steps. */
      function runs(states: string[], stepsDone: number): void {
        const seen: Record<string, string[]> = {};
        gw.upstreams.simulation.on('POST /api/v1/simulate', (_req, res) => {
          const id = randomUUID();
          seen[id] = [...states];
          res.writeHead(202, { 'content-type': 'application/json', location: `/api/v1/simulations/${id}` }).end(JSON.stringify({ id, status: 'queued' }));
        });
        gw.upstreams.simulation.on('GET /api/v1/simulations/*', (req, res) => {
          const left = seen[(req.url ?? '').split('/').pop()!]!;
          const status = left.length > 1 ? left.shift()! : left[0]!;
          res
            .writeHead(200, { 'content-type': 'application/json' })
            .end(JSON.stringify({ status, progress: { steps_done: stepsDone, steps_total: 5, percent: stepsDone * 20 } }));
        });
      }
      const simulate = (user: SignedIn) => gw.call('POST', '/api/v1/simulate', { headers: user.headers, body: { template: 'council-before-war' } });

      for (const [end, stepsDone, outcome] of [
        ['cancelled', 0, 'refunded'],
        ['stopped', 0, 'refunded'],
        ['cancelled', 2, 'charged'],
        ['stopped', 3, 'charged'],
        ['completed', 5, 'charged'],
        ['failed', 2, 'refunded'],
      ] as const) {
        it(`${outcome === 'refunded' ? 'refunds' : 'keeps the charge of'} a run that ended ${end} after ${stepsDone} steps, and stops following it`, async () => {
          const user = await gw.user();
          runs(['queued', 'running', end], stepsDone);
          const reply = await simulate(user);
          assert.equal(reply.status, 202);
          assert.equal(reply.headers.get('x-credits-charged'), String(SIMULATION));
          await followed(user);
          if (outcome === 'refunded') await assertRefunded(user, SIMULATION);
          else await assertCharged(user, SIMULATION);
          const checks = gw.upstreams.simulation.requests.filter((request) => request.method === 'GET');
          assert.equal(checks.length, 3, 'asked until it ended, then no more');
        });
      }
    });
    it('refunds a submission the upstream refused', async () => {
      const user = await gw.user();
      gw.upstreams.generation.on('POST /api/v1/timepoints/generate', (_req, res) => {
        res.writeHead(422, { 'content-type': 'application/problem+json' }).end('{"status":422,"detail":"callback_url: refused"}');
      });
      assert.equal((await generate(user, 'generate')).status, 422);
      await assertRefunded(user);
    });
  });

  describe('upstream gone', () => {
    it('refunds a call whose upstream drops the connection before answering (502)', async () => {
      const user = await gw.user();
      gw.upstreams.generation.on('POST /api/v1/timepoints/generate/sync', (req) => {
        req.socket.destroy();
      });
      const reply = await generate(user, 'generate/sync');
      assert.equal(reply.status, 502);
      assert.equal(reply.headers.get('x-credits-charged'), '0');
      assert.equal(reply.headers.get('x-balance-after'), String(SIGNUP));
      await assertRefunded(user);
    });
    it('refunds a stream whose upstream goes away before its done event', async () => {
      const user = await gw.user();
      gw.upstreams.generation.on('POST /api/v1/timepoints/generate/stream', (req, res) => {
        sse(res, START, AGENT);
        setTimeout(() => req.socket.destroy(), 20);
      });
      await generate(user, 'generate/stream').catch(() => undefined);
      await assertRefunded(user);
    });
  });

  describe('client gone', () => {
    it('refunds a call the client left before its answer (the upstream call is cancelled)', async () => {
      const user = await gw.user();
      const cancelled = new Promise<void>((resolve) => {
        gw.upstreams.generation.on('POST /api/v1/timepoints/generate/sync', (_req, res) => {
          res.once('close', () => resolve());
        });
      });
      const controller = new AbortController();
      const pending = fetch(`${gw.url}/api/v1/timepoints/generate/sync`, {
        method: 'POST',
        headers: { ...user.headers, 'content-type': 'application/json' },
        body: JSON.stringify({ query: 'abandoned' }),
        signal: controller.signal,
      }).catch(() => undefined);
      await waitFor('the call at the upstream', () => gw.upstreams.generation.requests.length > 0, { intervalMs: 10 });
      controller.abort();
      await pending;
      await cancelled;
      await assertRefunded(user);
    });
    it('refunds a stream the client left before its done event (the upstream call is cancelled)', async () => {
      const user = await gw.user();
      const cancelled = new Promise<void>((resolve) => {
        gw.upstreams.generation.on('POST /api/v1/timepoints/generate/stream', (_req, res) => {
          sse(res, START);
          res.once('close', () => resolve());
        });
      });
      const res = await pausedRequest(
        `${gw.url}/api/v1/timepoints/generate/stream`,
        { ...user.headers, 'content-type': 'application/json' },
        'POST',
        JSON.stringify({ query: 'x' }),
      );
      assert.match(String((await res[Symbol.asyncIterator]().next()).value), /event: start/);
      res.destroy();
      await cancelled;
      await assertRefunded(user);
    });
  });
});
