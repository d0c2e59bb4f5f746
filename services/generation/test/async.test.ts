import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { waitFor } from '../../../test/support/wait.ts';
import { CallbackPolicy, isPrivateAddress } from '../src/callbacks.ts';
import { type GenerationHarness, QUERY, serviceKey, startGeneration, user, userId } from './harness.ts';

const SECRET = 'callback-secret-0123456789';

interface Delivery {
  headers: IncomingHttpHeaders;
  raw: string;
}

describe('generation: async jobs and signed callbacks', function () {
  this.timeout(30_000);
  let gen: GenerationHarness;
  let receiver: Server;
  let receiverUrl = '';
  const deliveries: Delivery[] = [];
  let failFirst = 0;

  before(async () => {
    receiver = createServer((request, response) => {
      const chunks: Buffer[] = [];
      request.on('data', (chunk) => chunks.push(chunk));
      request.on('end', () => {
        deliveries.push({ headers: request.headers, raw: Buffer.concat(chunks).toString() });
        if (failFirst > 0) {
          failFirst -= 1;
          response.writeHead(503).end();
        } else response.writeHead(204).end();
      });
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hooks/tempora`;
    gen = await startGeneration({ CALLBACK_SECRET: SECRET, CALLBACK_ALLOWLIST: '127.0.0.1', CALLBACK_MAX_ATTEMPTS: '4' });
  });
  after(async () => {
    await gen.stop();
    receiver.close();
  });
  beforeEach(() => {
    deliveries.length = 0;
    failFirst = 0;
  });

  it('answers 202 with a job, which runs queued → running → completed and points at the scene', async () => {
    const reply = await gen.post('/api/v1/timepoints/generate', { query: QUERY, visibility: 'private', request_context: { ticket: 7 } }, user('alice'));
    assert.equal(reply.status, 202);
    assert.match(reply.headers.get('location')!, /^\/api\/v1\/timepoints\/jobs\/[0-9a-f-]+$/);
    assert.ok(['queued', 'running'].includes(reply.body.status));
    const job = await waitFor('the job to complete', async () => {
      const status = await gen.get(`/api/v1/timepoints/jobs/${reply.body.job_id}`, user('alice'));
      return status.body.status === 'completed' && status.body;
    });
    assert.ok(job.timepoint_id);
    assert.equal((await gen.get(job.timepoint_url, user('alice'))).body.request_context.ticket, 7);
    assert.equal((await gen.get(`/api/v1/timepoints/jobs/${reply.body.job_id}`, user('bob'))).status, 404, 'jobs are private to their owner');
    assert.equal((await gen.get(`/api/v1/timepoints/jobs/${reply.body.job_id}`, serviceKey)).status, 200);
  });

  it('POSTs the result to callback_url signed with HMAC-SHA256 over timestamp and body, retrying with back-off', async () => {
    failFirst = 2;
    const reply = await gen.post('/api/v1/timepoints/generate', { query: QUERY, callback_url: receiverUrl, request_context: { ticket: 9 } });
    assert.equal(reply.status, 202);
    await waitFor('three deliveries', async () => deliveries.length === 3 && deliveries);
    const last = deliveries[2]!;
    const timestamp = last.headers['x-tempora-timestamp'] as string;
    const expected = `sha256=${createHmac('sha256', SECRET).update(`${timestamp}.${last.raw}`).digest('hex')}`;
    assert.equal(last.headers['x-tempora-signature'], expected);
    assert.ok(Math.abs(Number(timestamp) - Date.now() / 1000) < 60);
    assert.equal(last.headers['x-tempora-job-id'], reply.body.job_id);
    assert.deepEqual(
      deliveries.map((d) => d.headers['x-tempora-attempt']),
      ['1', '2', '3'],
    );
    const payload = JSON.parse(last.raw);
    assert.equal(payload.status, 'completed');
    assert.equal(payload.job_id, reply.body.job_id);
    assert.equal(payload.timepoint.id, payload.timepoint_id);
    assert.deepEqual(payload.request_context, { ticket: 9 });
    const job = await waitFor('the callback delivered', async () => {
      const status = await gen.get(`/api/v1/timepoints/jobs/${reply.body.job_id}`);
      return status.body.callback.status === 'delivered' && status.body;
    });
    assert.equal(job.callback.attempts, 3);
  });

  it('reports a failed generation to the callback', async () => {
    const reply = await gen.post('/api/v1/timepoints/generate', { query: 'qqqqqqqq zzzzzz', callback_url: receiverUrl });
    assert.equal(reply.status, 202);
    await waitFor('the failure delivered', async () => deliveries.length === 1);
    const payload = JSON.parse(deliveries[0]!.raw);
    assert.equal(payload.status, 'failed');
    assert.equal(payload.error.status, 422);
    const job = (await gen.get(`/api/v1/timepoints/jobs/${reply.body.job_id}`)).body;
    assert.equal(job.status, 'failed');
  });

  it('refuses loopback and private callback hosts unless allow-listed', async () => {
    const strict = await startGeneration({ CALLBACK_SECRET: SECRET });
    try {
      for (const url of [
        receiverUrl,
        'http://localhost:9/x',
        'http://10.1.2.3/x',
        'http://192.168.0.10/x',
        'http://169.254.169.254/latest',
        'http://[::1]/x',
        'http://[fd00::1]/x',
        'http://100.64.0.1/x',
      ]) {
        const reply = await strict.post('/api/v1/timepoints/generate', { query: QUERY, callback_url: url });
        assert.equal(reply.status, 422, url);
        assert.equal(reply.body.errors[0].path, 'body.callback_url');
      }
      assert.equal((await strict.post('/api/v1/timepoints/generate', { query: QUERY, callback_url: 'ftp://example.com/x' })).status, 422);
    } finally {
      await strict.stop();
    }
    const unsigned = await startGeneration({ CALLBACK_ALLOWLIST: '127.0.0.1' });
    try {
      const reply = await unsigned.post('/api/v1/timepoints/generate', { query: QUERY, callback_url: receiverUrl });
      assert.equal(reply.status, 422, 'no secret, no callbacks');
    } finally {
      await unsigned.stop();
    }
  });

  it('classifies addresses and honours host and CIDR allow-list entries', async () => {
    for (const address of ['127.0.0.1', '10.0.0.1', '172.16.5.4', '192.168.1.1', '169.254.1.1', '::1', 'fe80::1', 'fc00::1', '::ffff:127.0.0.1', '0.0.0.0'])
      assert.ok(isPrivateAddress(address), address);
    for (const address of ['93.184.216.34', '8.8.8.8', '2606:4700::1111']) assert.ok(!isPrivateAddress(address), address);
    const resolve = async (host: string) => (host === 'hooks.internal' ? ['10.9.8.7'] : host === 'public.example' ? ['93.184.216.34'] : ['127.0.0.1']);
    assert.equal(await new CallbackPolicy([], resolve).check('https://public.example/x'), undefined);
    assert.match((await new CallbackPolicy([], resolve).check('https://hooks.internal/x'))!, /private/);
    assert.equal(await new CallbackPolicy(['hooks.internal'], resolve).check('https://hooks.internal/x'), undefined);
    assert.equal(await new CallbackPolicy(['10.0.0.0/8'], resolve).check('https://hooks.internal/x'), undefined);
    assert.match((await new CallbackPolicy(['10.0.0.0/8'], resolve).check('https://other.internal/x'))!, /127\.0\.0\.1/);
    assert.match((await new CallbackPolicy([], resolve).check('https://user:pw@public.example/x'))!, /credentials/);
  });
});

describe('generation: Idempotency-Key on an asynchronous generation', function () {
  this.timeout(30_000);
  let gen: GenerationHarness;
  before(async () => {
    gen = await startGeneration();
  });
  after(() => gen.stop());

  const submit = (owner: string, key: string | undefined, body: Record<string, unknown> = { query: QUERY }) =>
    gen.post('/api/v1/timepoints/generate', body, { ...user(owner), ...(key === undefined ? {} : { 'Idempotency-Key': key }) });
  const jobsOf = async (owner: string) =>
    Number(
      (
        await gen.instance
          .knex('generation_jobs')
          .where({ owner: userId(owner) })
          .count<Array<{ count: string }>>('* as count')
      )[0]!.count,
    );

  it('answers a retry with the job its key submitted, as it stands now, and submits nothing', async () => {
    const first = await submit('replayer', 'order-1');
    assert.equal(first.status, 202);
    assert.equal(first.headers.get('idempotent-replayed'), null);
    await waitFor(
      'the first job to complete',
      async () => (await gen.get(`/api/v1/timepoints/jobs/${first.body.job_id}`, user('replayer'))).body.status === 'completed',
    );
    // The same request written otherwise (field order, the key as the draft's quoted string) is the same request.
    const retry = await submit('replayer', '"order-1"', { query: QUERY });
    assert.equal(retry.status, 202);
    assert.equal(retry.body.job_id, first.body.job_id);
    assert.equal(retry.body.status, 'completed', 'the job as it stands now');
    assert.equal(retry.headers.get('idempotent-replayed'), 'true');
    assert.equal(retry.headers.get('location'), first.headers.get('location'));
    assert.equal(await jobsOf('replayer'), 1);
  });

  it('refuses the key with a different request (422, naming the header and the job), submitting nothing', async () => {
    const first = await submit('changer', 'order-2');
    const changed = await submit('changer', 'order-2', { query: 'The fall of the Berlin Wall, November 1989' });
    assert.equal(changed.status, 422);
    assert.equal(changed.body.type, 'https://tempora.dev/problems/idempotency-key-reused');
    assert.deepEqual(
      changed.body.errors.map((e: { path: string }) => e.path),
      ['headers.idempotency-key'],
    );
    assert.match(changed.body.detail, new RegExp(first.body.job_id));
    assert.equal(await jobsOf('changer'), 1);
  });

  it('keeps keys per owner, and submits one job for concurrent requests with one key', async () => {
    const mine = await submit('owner-a', 'shared');
    const theirs = await submit('owner-b', 'shared');
    assert.notEqual(mine.body.job_id, theirs.body.job_id);
    const crowd = await Promise.all(Array.from({ length: 10 }, () => submit('crowd', 'order-3')));
    assert.deepEqual([...new Set(crowd.map((reply) => reply.status))], [202]);
    assert.equal(new Set(crowd.map((reply) => reply.body.job_id)).size, 1);
    assert.equal(crowd.filter((reply) => reply.headers.get('idempotent-replayed') === 'true').length, 9);
    assert.equal(await jobsOf('crowd'), 1);
  });

  it('refuses a key that is empty, too long, not ASCII or a broken quoted string (422 naming the header)', async () => {
    for (const key of ['', 'k'.repeat(256), 'clé', '"open']) {
      const reply = await submit('bad-keys', key);
      assert.equal(reply.status, 422, JSON.stringify(key));
      assert.deepEqual(
        reply.body.errors.map((e: { path: string }) => e.path),
        ['headers.idempotency-key'],
        JSON.stringify(key),
      );
    }
    assert.equal(await jobsOf('bad-keys'), 0);
  });
});
