/**
 * The client against a tiny local server that answers as each test scripts it: the answers our services
 * never give (a wrong resource, a wrong shape, a dropped stream) and the timing of retries.
 */
import assert from 'node:assert/strict';
import { InvalidAnswer, retryAfterSeconds, Tempora, TemporaProblem } from '../src/index.ts';
import { json, problem, scriptedServer, simulationRun } from './local-server.ts';

const RUN = '3f1d9a52-7c1e-4b8a-9d2f-0a1b2c3d4e5f';
const OTHER = '9e8d7c6b-5a49-4382-8716-f5e4d3c2b1a0';
const fast = { attempts: 3, maxWaitSeconds: 5, backoffMs: 10 };

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  assert.fail('the call was expected to fail');
}

describe('@tempora/client fails closed', () => {
  it('refuses an answer for another resource than the one asked', async () => {
    const server = await scriptedServer((_, response) => json(response, 200, simulationRun(OTHER)));
    try {
      const tempora = new Tempora({ baseUrl: server.url, apiKey: 'key', retry: fast });
      const error = await rejection(tempora.api.GET('/api/v1/simulations/{id}', { params: { path: { id: RUN } } }));
      assert.ok(error instanceof InvalidAnswer, String(error));
      assert.match(error.reason, new RegExp(`answers for id "${OTHER}", not "${RUN}"`));
      // The same answer for the id asked passes.
      const own = await scriptedServer((_, response) => json(response, 200, simulationRun(RUN)));
      const ok = await new Tempora({ baseUrl: own.url, apiKey: 'key' }).api.GET('/api/v1/simulations/{id}', { params: { path: { id: RUN } } });
      assert.equal(ok.data?.id, RUN);
      await own.close();
    } finally {
      await server.close();
    }
  });

  it('refuses an answer that does not match its schema, an undocumented status and an undocumented media type', async () => {
    const answers = [
      (response: Parameters<typeof json>[0]) => json(response, 200, { moments: 'many' }),
      (response: Parameters<typeof json>[0]) => json(response, 201, { moments: 1 }),
      (response: Parameters<typeof json>[0]) => {
        response.writeHead(200, { 'content-type': 'text/html' });
        response.end('<html>a captive portal</html>');
      },
      (response: Parameters<typeof json>[0]) => {
        response.writeHead(500, { 'content-type': 'application/problem+json' });
        response.end('{"title": "no status, no type"}');
      },
    ];
    const server = await scriptedServer((_, response, count) => answers[count - 1]!(response));
    try {
      const tempora = new Tempora({ baseUrl: server.url, retry: fast });
      const reasons = [];
      for (let i = 0; i < answers.length; i++) {
        const error = await rejection(tempora.api.GET('/api/v1/graph/stats'));
        assert.ok(error instanceof InvalidAnswer, String(error));
        reasons.push(error.reason);
      }
      assert.match(reasons[0]!, /must have required property|must be/);
      assert.match(reasons[1]!, /status is not documented/);
      assert.match(reasons[2]!, /media type "text\/html" is not documented/);
      assert.match(reasons[3]!, /a problem that is not one/);
    } finally {
      await server.close();
    }
  });

  it('turns a problem into a typed error with status, type, detail and Retry-After', async () => {
    const server = await scriptedServer((_, response) =>
      json(response, 404, { ...problem(404, 'Not Found', 'no moment at that path'), type: 'https://tempora.dev/problems/not-found' }),
    );
    try {
      const error = await rejection(new Tempora({ baseUrl: server.url }).api.GET('/api/v1/graph/moments/{path}', { params: { path: { path: '1969/x' } } }));
      assert.ok(error instanceof TemporaProblem);
      assert.deepEqual(
        [error.status, error.type, error.detail, error.retryAfter],
        [404, 'https://tempora.dev/problems/not-found', 'no moment at that path', undefined],
      );
    } finally {
      await server.close();
    }
  });

  it('reads Retry-After in seconds and as an HTTP date', () => {
    const now = Date.parse('2026-01-01T00:00:00Z');
    assert.equal(retryAfterSeconds('7', now), 7);
    assert.equal(retryAfterSeconds('Thu, 01 Jan 2026 00:00:09 GMT', now), 9);
    assert.equal(retryAfterSeconds('Wed, 31 Dec 2025 23:00:00 GMT', now), 0);
    assert.equal(retryAfterSeconds('soon', now), undefined);
    assert.equal(retryAfterSeconds(null, now), undefined);
  });
});

describe('@tempora/client retries only where safe', () => {
  it('waits what Retry-After says (as an HTTP date) before retrying a GET, and gives up on a wait past its limit', async () => {
    const times: number[] = [];
    const server = await scriptedServer((_, response, count) => {
      times.push(Date.now());
      if (count === 1) return json(response, 429, problem(429, 'Too Many Requests', 'slow down'), { 'retry-after': new Date(Date.now() + 2000).toUTCString() });
      if (count === 2) return json(response, 503, problem(503, 'Service Unavailable', 'later'), { 'retry-after': '1' });
      if (count === 3) return json(response, 200, { ok: true });
      return json(response, 429, problem(429, 'Too Many Requests', 'come back in an hour'), { 'retry-after': '3600' });
    });
    try {
      const tempora = new Tempora({ baseUrl: server.url, retry: fast });
      // A body the schema refuses, but only after the two waits: what matters here is when each try came.
      await rejection(tempora.api.GET('/api/v1/graph/stats'));
      assert.equal(times.length, 3);
      // An HTTP date has a one-second resolution: at least one full second, at most the two asked.
      assert.ok(times[1]! - times[0]! >= 1000, `waited ${times[1]! - times[0]!} ms for the date`);
      assert.ok(times[2]! - times[1]! >= 1000, `waited ${times[2]! - times[1]!} ms for 1 s`);
      const started = Date.now();
      const error = await rejection(tempora.api.GET('/api/v1/graph/stats'));
      assert.ok(error instanceof TemporaProblem);
      assert.deepEqual([error.status, error.retryAfter], [429, 3600]);
      assert.ok(Date.now() - started < 1000, 'a wait past the limit is not waited');
    } finally {
      await server.close();
    }
  });

  it('sends a simulation start again with the same Idempotency-Key after a lost connection and a 503', async () => {
    const server = await scriptedServer((_, response, count) => {
      if (count === 1) return response.socket!.destroy();
      if (count === 2) return json(response, 503, problem(503, 'Service Unavailable', 'busy'), { 'retry-after': '0' });
      json(response, 202, simulationRun(RUN), { location: `/api/v1/simulations/${RUN}` });
    });
    try {
      const tempora = new Tempora({ baseUrl: server.url, apiKey: 'key', retry: fast });
      const run = await tempora.simulate({ prompt: 'the printing press reaches Venice', mode: 'FORWARD', fidelity: 1 });
      assert.equal(run.id, RUN);
      const keys = server.seen.map((request) => request.headers['idempotency-key']);
      assert.equal(keys.length, 3);
      assert.match(keys[0] as string, /^[0-9a-f-]{36}$/);
      assert.deepEqual(new Set(keys).size, 1, `one key on every try: ${keys.join(', ')}`);
      assert.deepEqual(new Set(server.seen.map((request) => request.body)).size, 1);
      // A key the caller gives is the one sent.
      await tempora.simulate({ prompt: 'again' }, { idempotencyKey: 'my-key-1' });
      assert.equal(server.seen.at(-1)!.headers['idempotency-key'], 'my-key-1');
    } finally {
      await server.close();
    }
  });

  it("ends a Retry-After wait when the caller's signal aborts, without trying again", async () => {
    const server = await scriptedServer((_, response) => json(response, 503, problem(503, 'Service Unavailable', 'later'), { 'retry-after': '20' }));
    try {
      const tempora = new Tempora({ baseUrl: server.url, retry: { ...fast, maxWaitSeconds: 60 } });
      const started = Date.now();
      const error = await rejection(tempora.api.GET('/api/v1/graph/stats', { signal: AbortSignal.timeout(300) }));
      assert.equal((error as Error).name, 'TimeoutError');
      assert.ok(Date.now() - started < 5000, `the 20 s wait ended with the deadline (${Date.now() - started} ms)`);
      assert.equal(server.seen.length, 1);
    } finally {
      await server.close();
    }
  });

  it('does not send an unkeyed POST twice', async () => {
    const server = await scriptedServer((_, response) => json(response, 503, problem(503, 'Service Unavailable', 'busy'), { 'retry-after': '0' }));
    try {
      const error = await rejection(new Tempora({ baseUrl: server.url, apiKey: 'key', retry: fast }).ask('who built the pyramids?'));
      assert.ok(error instanceof TemporaProblem && error.status === 503);
      assert.equal(server.seen.length, 1);
      assert.equal(server.seen[0]!.headers['idempotency-key'], undefined);
    } finally {
      await server.close();
    }
  });

  it('rotates the token pair once on a 401 and sends the request again with the new access token', async () => {
    const user = { id: 'u1', email: null, name: null, tier: 'free', is_demo: true, balance: 5, providers: [], created_at: '2026-01-01T00:00:00Z' };
    const pair = (n: number) => ({
      access_token: `access-${n}`,
      refresh_token: `refresh-${n}`,
      token_type: 'Bearer' as const,
      expires_in: 900,
      refresh_expires_in: 86400,
    });
    const server = await scriptedServer((request, response) => {
      if (request.path === '/api/v1/auth/refresh')
        return JSON.parse(request.body).refresh_token === 'refresh-1'
          ? json(response, 200, pair(2))
          : json(response, 401, problem(401, 'Unauthorized', 'spent'));
      if (request.headers.authorization === 'Bearer access-2') return json(response, 200, user);
      json(response, 401, problem(401, 'Unauthorized', 'expired'));
    });
    try {
      const kept: unknown[] = [];
      const tempora = new Tempora({ baseUrl: server.url, tokens: pair(1), onTokens: (tokens) => kept.push(tokens) });
      const [a, b] = await Promise.all([tempora.api.GET('/api/v1/auth/me'), tempora.api.GET('/api/v1/auth/me')]);
      assert.deepEqual([a.data?.id, b.data?.id], ['u1', 'u1']);
      assert.equal(server.seen.filter((request) => request.path === '/api/v1/auth/refresh').length, 1, 'one rotation for both callers');
      assert.deepEqual(kept, [pair(2)]);
      // A spent refresh token: the pair is dropped and the 401 is the caller's.
      const stale = new Tempora({ baseUrl: server.url, tokens: { ...pair(3), access_token: 'access-3' } });
      const error = await rejection(stale.api.GET('/api/v1/auth/me'));
      assert.ok(error instanceof TemporaProblem && error.status === 401);
      assert.equal(stale.tokens, undefined);
    } finally {
      await server.close();
    }
  });
});

describe('@tempora/client event streams', () => {
  const event = (id: number, name: string, data: unknown) => `id: ${id}\nevent: ${name}\ndata: ${JSON.stringify(data)}\n\n`;

  it('resumes a simulation stream that drops, with Last-Event-ID, yielding each event once', async () => {
    const server = await scriptedServer((_, response, count) => {
      response.writeHead(200, { 'content-type': 'text/event-stream' });
      response.write(': heartbeat\n\n');
      response.write(event(1, 'run', simulationRun(RUN)));
      response.write(event(2, 'step', { seq: 1 }));
      // The first connection drops once its events are out.
      if (count === 1) return void setTimeout(() => response.destroy(), 50);
      // The server replays from the start, as the simulation service does.
      response.end(event(3, 'step', { seq: 2 }) + event(4, 'end', simulationRun(RUN)));
    });
    try {
      const tempora = new Tempora({ baseUrl: server.url, apiKey: 'key', retry: fast });
      const seen = [];
      for await (const item of tempora.simulationEvents(RUN)) seen.push(`${item.id}:${item.event}`);
      assert.deepEqual(seen, ['1:run', '2:step', '3:step', '4:end']);
      assert.equal(server.seen.length, 2);
      assert.equal(server.seen[0]!.headers['last-event-id'], undefined);
      assert.equal(server.seen[1]!.headers['last-event-id'], '2');
    } finally {
      await server.close();
    }
  });

  it('refuses an event whose data is not JSON, and turns an error event into a problem', async () => {
    const server = await scriptedServer((request, response) => {
      response.writeHead(200, { 'content-type': 'text/event-stream' });
      if (request.path.endsWith('/events')) return response.end('id: 1\nevent: run\ndata: {not json\n\n');
      response.end(event(1, 'start', {}) + event(2, 'error', problem(502, 'Bad Gateway', 'the model provider failed')));
    });
    try {
      const tempora = new Tempora({ baseUrl: server.url, apiKey: 'key' });
      const bad = await rejection(
        (async () => {
          for await (const _ of tempora.simulationEvents(RUN));
        })(),
      );
      assert.ok(bad instanceof InvalidAnswer && /not JSON/.test(bad.reason), String(bad));
      const names: string[] = [];
      const failed = await rejection(
        (async () => {
          for await (const item of tempora.streamScene({ query: 'the fall of Constantinople' })) names.push(item.event);
        })(),
      );
      assert.deepEqual(names, ['start']);
      assert.ok(failed instanceof TemporaProblem && failed.status === 502 && failed.detail === 'the model provider failed');
    } finally {
      await server.close();
    }
  });
});

describe('@tempora/client default headers', () => {
  it("sends them with every request, retries and streams included; a call's own header takes their place", async () => {
    const server = await scriptedServer((request, response, count) => {
      if (request.path.endsWith('/events')) {
        response.writeHead(200, { 'content-type': 'text/event-stream' });
        return response.end(`id: 1\nevent: end\ndata: ${JSON.stringify(simulationRun(RUN))}\n\n`);
      }
      if (count === 1) return json(response, 503, problem(503, 'Service Unavailable', 'try again'));
      json(response, 200, simulationRun(RUN));
    });
    try {
      const tempora = new Tempora({ baseUrl: server.url, apiKey: 'key', retry: fast, headers: { 'X-Request-ID': 'req-1', 'X-Tenant': 'acme' } });
      await tempora.api.GET('/api/v1/simulations/{id}', { params: { path: { id: RUN } } });
      await tempora.api.GET('/api/v1/simulations/{id}', { params: { path: { id: RUN } }, headers: { 'X-Request-ID': 'req-2' } });
      for await (const _ of tempora.simulationEvents(RUN));
      assert.deepEqual(
        server.seen.map((seen) => [seen.headers['x-request-id'], seen.headers['x-tenant'], seen.headers['x-api-key']]),
        [
          ['req-1', 'acme', 'key'],
          ['req-1', 'acme', 'key'],
          ['req-2', 'acme', 'key'],
          ['req-1', 'acme', 'key'],
        ],
        'the 503 and its retry, the overridden call, the stream',
      );
    } finally {
      await server.close();
    }
  });

  it('sends a forwarded Authorization as given, in place of an API key, and never rotates it', async () => {
    const server = await scriptedServer((_, response) => json(response, 401, problem(401, 'Unauthorized', 'token expired')));
    try {
      const tempora = new Tempora({ baseUrl: server.url, apiKey: 'key', retry: fast, headers: { Authorization: 'Bearer caller-token' } });
      const error = await rejection(tempora.api.GET('/api/v1/auth/me'));
      assert.ok(error instanceof TemporaProblem && error.status === 401, String(error));
      assert.equal(server.seen.length, 1, "a 401 to a forwarded token is the caller's to answer");
      assert.equal(server.seen[0]!.headers.authorization, 'Bearer caller-token');
      assert.equal(server.seen[0]!.headers['x-api-key'], undefined);
    } finally {
      await server.close();
    }
  });
});
