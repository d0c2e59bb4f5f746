import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { waitFor } from '../../../test/support/wait.ts';
import { type GatewayHarness, type SignedIn, useGateway } from './harness.ts';

const SIGNUP = 50;
/** A fidelity-3 simulation run (the default fidelity). */
const RUN = 8;

interface Entry {
  kind: string;
  amount: number;
  refund_of: string | null;
}

async function ledger(gw: GatewayHarness, user: SignedIn): Promise<Entry[]> {
  const history = await gw.call('GET', '/api/v1/credits/history', { headers: user.headers });
  assert.equal(history.status, 200);
  return history.body.items as Entry[];
}

/** Waits until the user's balance is `balance` (a sweep or a follower books it a moment later). */
async function balanceReaches(gw: GatewayHarness, user: SignedIn, balance: number, withinMs: number): Promise<void> {
  const { ledger: repository } = gw.instance.repository;
  await waitFor(`a balance of ${balance}`, async () => (await repository.balance(user.userId)) === balance, { timeoutMs: withinMs, intervalMs: 25 }).catch(
    async (error: Error) => assert.fail(`${error.message}: ${JSON.stringify(await ledger(gw, user))}`),
  );
  assert.equal(await repository.ledgerSum(user.userId), balance, 'the ledger sums to the balance');
}

const openCharges = async (gw: GatewayHarness, user: SignedIn) =>
  Number((await gw.instance.knex('open_charges').where({ user_id: user.userId }).count<{ count: string }[]>('* as count'))[0]!.count);

/**
 * A charged call's charge stays open, in PostgreSQL, until the call settles it; one its replica never
 * settled (killed mid-call, or while retrying a refund the database refused) is refunded by any replica
 * once past its settle-by time. test/faults/killed.test.ts kills a real gateway process mid-call.
 */
describe('gateway: charges are settled durably', function () {
  this.timeout(30_000);
  let gw: GatewayHarness;
  useGateway(
    (started) => {
      gw = started;
    },
    {
      env: {
        CHARGED_JOB_CHECK_MS: '50',
        CHARGED_CALL_MAX_MS: '1000',
        CHARGE_SETTLE_GRACE_MS: '500',
        UPSTREAM_TIMEOUT_MS: '5000',
        SYNC_GENERATION_TIMEOUT_MS: '5000',
      },
      resetUpstreams: true,
    },
  );

  const generate = (user: SignedIn) =>
    gw.call('POST', '/api/v1/timepoints/generate/sync', { headers: user.headers, body: { query: 'The fall of Constantinople, 1453' } });

  it('closes the charge of a call that delivered, and of one that was refunded', async () => {
    const user = await gw.user();
    const delivered = await generate(user);
    assert.equal(delivered.status, 200);
    gw.upstreams.generation.on('POST /api/v1/timepoints/generate/sync', (_req, res) => {
      res.writeHead(500).end();
    });
    assert.equal((await generate(user)).status, 500);
    await balanceReaches(gw, user, SIGNUP - 2, 2_000);
    assert.equal(await openCharges(gw, user), 0);
    // Past every settle-by time: the sweep finds nothing to refund. The clock is what is tested here (no
    // event marks "a settle-by time passed and nothing happened"), so the test waits it out.
    await sleep(1_700);
    await balanceReaches(gw, user, SIGNUP - 2, 0);
  });

  it('refunds a charge no replica settled once past its settle-by time, and never one that was settled', async () => {
    const user = await gw.user();
    const { credits } = gw.instance.deps.ledger;
    // As a replica killed mid-call leaves them: charges booked open, one settled before its time by a call that delivered.
    await credits.charge(user.userId, 3, `proxy:${randomUUID()}`, 'generation.gemini3', {}, 1_000);
    const settled = `proxy:${randomUUID()}`;
    await credits.charge(user.userId, 5, settled, 'generation.hd', {}, 1_000);
    await credits.close(user.userId, settled);
    await balanceReaches(gw, user, SIGNUP - 8, 0);
    // The gateway's own follower sweeps every CHARGED_JOB_CHECK_MS; a second sweeper at once must not refund twice.
    // Waits out the charges' 1 s settle-by time, which is what makes them due: the clock is the subject here.
    await sleep(1_000);
    await credits.refundUnsettled();
    await balanceReaches(gw, user, SIGNUP - 5, 2_000);
    const entries = await ledger(gw, user);
    assert.deepEqual(
      entries.map((entry) => `${entry.kind} ${entry.amount}`),
      ['refund 3', 'charge -5', 'charge -3', 'signup_grant 50'],
    );
    assert.equal(await openCharges(gw, user), 0);
  });

  it('cuts off a charged call at CHARGED_CALL_MAX_MS with a 504, refunded', async () => {
    const user = await gw.user();
    gw.upstreams.generation.on('POST /api/v1/timepoints/generate/sync', async (_req, res) => {
      await sleep(3_000);
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
    const started = Date.now();
    const reply = await generate(user);
    assert.equal(reply.status, 504, JSON.stringify(reply.body));
    assert.match(reply.body.detail, /did not finish within 1 s/);
    assert.ok(Date.now() - started < 2_500, `cut off after ${Date.now() - started} ms`);
    assert.equal(reply.headers.get('x-credits-charged'), '0');
    await balanceReaches(gw, user, SIGNUP, 2_000);
  });

  describe('Idempotency-Key on a simulation run (its service replays the run)', () => {
    /** The simulation stand-in: one run per Idempotency-Key, replayed as the simulation service does; `failFirst` answers the first call 503 after making its run. */
    function simulationStandIn(options: { failFirst?: boolean } = {}) {
      const runs = new Map<string, string>();
      let calls = 0;
      gw.upstreams.simulation.on('POST /api/v1/simulate', (req, res) => {
        calls += 1;
        const key = String(req.headers['idempotency-key'] ?? randomUUID()).replace(/^"(.*)"$/, '$1');
        const replayed = runs.has(key);
        if (!replayed) runs.set(key, randomUUID());
        if (options.failFirst && calls === 1) {
          res.writeHead(503, { 'content-type': 'application/problem+json', 'retry-after': '1' }).end('{"status":503}');
          return;
        }
        const id = runs.get(key)!;
        res
          .writeHead(202, { 'content-type': 'application/json', location: `/api/v1/simulations/${id}`, ...(replayed ? { 'idempotent-replayed': 'true' } : {}) })
          .end(JSON.stringify({ id, status: 'queued' }));
      });
      gw.upstreams.simulation.on('GET /api/v1/simulations/*', (_req, res) => {
        res.writeHead(200, { 'content-type': 'application/json' }).end('{"status":"running"}');
      });
      return runs;
    }
    const simulate = (user: SignedIn, key: string | undefined, body: object = { template: 'council-before-war' }) =>
      gw.call('POST', '/api/v1/simulate', { headers: { ...user.headers, ...(key ? { 'Idempotency-Key': key } : {}) }, body });

    it('charges a retry carrying the same key once: the retry rides on the first charge', async () => {
      const user = await gw.user();
      const runs = simulationStandIn();
      const key = randomUUID();
      const replies = [await simulate(user, key), ...(await Promise.all([simulate(user, key), simulate(user, key)]))];
      assert.deepEqual(
        replies.map((reply) => reply.status),
        [202, 202, 202],
      );
      assert.deepEqual(
        replies.map((reply) => reply.headers.get('x-credits-charged')),
        [String(RUN), '0', '0'],
      );
      assert.equal(new Set(replies.map((reply) => reply.body.id)).size, 1, 'one run');
      assert.equal(runs.size, 1);
      await balanceReaches(gw, user, SIGNUP - RUN, 0);
      // Without a key, each call is its own run and its own charge.
      await simulate(user, undefined);
      await balanceReaches(gw, user, SIGNUP - 2 * RUN, 0);
    });

    it('charges a retry anew when the first call was refunded (its answer lost: 503), and once only', async () => {
      const user = await gw.user();
      simulationStandIn({ failFirst: true });
      const key = randomUUID();
      const first = await simulate(user, key);
      assert.equal(first.status, 503);
      assert.equal(first.headers.get('x-credits-charged'), '0');
      const retry = await simulate(user, key);
      assert.equal(retry.status, 202);
      assert.equal(retry.headers.get('x-credits-charged'), String(RUN));
      assert.equal((await simulate(user, key)).headers.get('x-credits-charged'), '0');
      await balanceReaches(gw, user, SIGNUP - RUN, 0);
      const entries = await ledger(gw, user);
      assert.deepEqual(
        entries.map((entry) => entry.kind),
        ['charge', 'refund', 'charge', 'signup_grant'],
      );
    });

    it('answers a retry while the first call is unanswered 409 with Retry-After, charging nothing', async () => {
      const user = await gw.user();
      let release!: () => void;
      const held = new Promise<void>((resolve) => (release = resolve));
      gw.upstreams.simulation.on('POST /api/v1/simulate', async (_req, res) => {
        await held;
        res.writeHead(202, { 'content-type': 'application/json', location: '/api/v1/simulations/r1' }).end('{"id":"r1","status":"queued"}');
      });
      gw.upstreams.simulation.on('GET /api/v1/simulations/*', (_req, res) => {
        res.writeHead(200, { 'content-type': 'application/json' }).end('{"status":"running"}');
      });
      const key = randomUUID();
      const first = simulate(user, key);
      // The first call's POST at the upstream (its charge is booked before it is forwarded); not any request:
      // the job follower's GETs of earlier tests' runs land there too, and a retry sent before the first call
      // was charged would be the one forwarded, held until the cut-off (CI saw its 504).
      await waitFor('the first POST at the upstream', () => gw.upstreams.simulation.requests.some((request) => request.method === 'POST'), { intervalMs: 10 });
      const retry = await simulate(user, key);
      assert.equal(retry.status, 409, JSON.stringify(retry.body));
      assert.equal(retry.headers.get('retry-after'), '1');
      assert.equal(retry.headers.get('x-credits-charged'), '0');
      release();
      assert.equal((await first).status, 202);
      assert.equal((await simulate(user, key)).headers.get('x-credits-charged'), '0', 'then it rides on the first charge');
      await balanceReaches(gw, user, SIGNUP - RUN, 0);
    });

    it('refuses the same key with a request of another price (422), charging nothing', async () => {
      const user = await gw.user();
      simulationStandIn();
      const key = randomUUID();
      assert.equal((await simulate(user, key, { template: 'council-before-war', fidelity: 3 })).status, 202);
      const other = await simulate(user, key, { template: 'council-before-war', fidelity: 5 });
      assert.equal(other.status, 422);
      assert.match(other.body.detail, /Idempotency-Key/);
      await balanceReaches(gw, user, SIGNUP - RUN, 0);
    });

    it("reads the key as the services do: a quoted key (the draft's structured string) is the bare one", async () => {
      const user = await gw.user();
      simulationStandIn();
      const key = randomUUID();
      assert.equal((await simulate(user, key)).headers.get('x-credits-charged'), String(RUN));
      assert.equal((await simulate(user, `"${key}"`)).headers.get('x-credits-charged'), '0');
    });

    it('keys are per user: the same key of two users makes two charges', async () => {
      const [a, b] = [await gw.user(), await gw.user()];
      simulationStandIn();
      const key = randomUUID();
      assert.equal((await simulate(a, key)).headers.get('x-credits-charged'), String(RUN));
      assert.equal((await simulate(b, key)).headers.get('x-credits-charged'), String(RUN));
    });
  });

  it('keys the charge of an asynchronous generation by its Idempotency-Key (its service replays the job), and not a synchronous one', async () => {
    const user = await gw.user();
    const jobs = new Map<string, string>();
    gw.upstreams.generation.on('POST /api/v1/timepoints/generate', (req, res) => {
      const key = String(req.headers['idempotency-key']);
      const replayed = jobs.has(key);
      if (!replayed) jobs.set(key, randomUUID());
      const id = jobs.get(key)!;
      res
        .writeHead(202, {
          'content-type': 'application/json',
          location: `/api/v1/timepoints/jobs/${id}`,
          ...(replayed ? { 'idempotent-replayed': 'true' } : {}),
        })
        .end(JSON.stringify({ job_id: id, status: 'queued' }));
    });
    gw.upstreams.generation.on('GET /api/v1/timepoints/jobs/*', (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"status":"running"}');
    });
    const submit = (path: string) =>
      gw.call('POST', path, { headers: { ...user.headers, 'Idempotency-Key': 'render-1' }, body: { query: 'The fall of Constantinople, 1453' } });
    const replies = [await submit('/api/v1/timepoints/generate'), await submit('/api/v1/timepoints/generate')];
    assert.deepEqual(
      replies.map((reply) => reply.status),
      [202, 202],
    );
    assert.deepEqual(
      replies.map((reply) => reply.headers.get('x-credits-charged')),
      ['2', '0'],
    );
    assert.equal(replies[1]!.body.job_id, replies[0]!.body.job_id);
    await balanceReaches(gw, user, SIGNUP - 2, 0);
    // A synchronous generation renders anew on every call: the key does not key its charge.
    assert.equal((await submit('/api/v1/timepoints/generate/sync')).headers.get('x-credits-charged'), '2');
    assert.equal((await submit('/api/v1/timepoints/generate/sync')).headers.get('x-credits-charged'), '2');
    await balanceReaches(gw, user, SIGNUP - 6, 0);
  });
});
