import assert from 'node:assert/strict';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import Koa from 'koa';
import { z } from 'zod';
import { listenStandIn, request, type StandIn } from '../../../test/support/http.ts';
import { problemMiddleware } from '../src/http/errors.ts';
import { ServiceClient, UnexpectedAnswer } from '../src/http/service-client.ts';
import { createLogger } from '../src/observability/logger.ts';

const Balance = z.object({ balance: z.number().int() });

describe('ServiceClient: answers parsed with the peer’s schema', () => {
  let peer: StandIn;
  let answer: { status: number; type: string; body: string };
  let caller: Server;
  let callerUrl: string;

  before(async () => {
    peer = await listenStandIn((_req, res) => {
      res.writeHead(answer.status, { 'content-type': answer.type });
      res.end(answer.body);
    });
    // A service answering its own request from the peer's answer, errors left to the kit's problem middleware.
    const client = new ServiceClient(peer.url, undefined, 2000, 'the ledger');
    const app = new Koa();
    app.use(problemMiddleware(createLogger('test', 'silent')));
    app.use(async (ctx) => {
      const reply = await client.call('GET', '/balance', { requestId: 'test' });
      ctx.body = reply.json(Balance);
    });
    caller = app.listen(0, '127.0.0.1');
    await new Promise((resolve) => caller.once('listening', resolve));
    callerUrl = `http://127.0.0.1:${(caller.address() as AddressInfo).port}`;
  });
  after(async () => {
    await new Promise((resolve) => caller.close(resolve));
    await peer.stop();
  });

  it('passes on the fields the schema names, and nothing else', async () => {
    answer = { status: 200, type: 'application/json', body: JSON.stringify({ balance: 12, secret: 'internal' }) };
    const reply = await request(callerUrl, '/');
    assert.equal(reply.status, 200);
    assert.deepEqual(reply.body, { balance: 12 });
  });

  it('answers 502 naming the peer and the first mismatch when the answer is outside the schema', async () => {
    answer = { status: 200, type: 'application/json', body: JSON.stringify({ balance: 'twelve' }) };
    const reply = await request(callerUrl, '/');
    assert.equal(reply.status, 502);
    assert.match(reply.headers.get('content-type') ?? '', /application\/problem\+json/);
    assert.equal(reply.body.title, 'Bad Gateway');
    assert.match(reply.body.detail, /^the ledger answered outside its schema: balance: .*expected number/);
    assert.doesNotMatch(JSON.stringify(reply.body), /twelve/);
  });

  it('answers 502 when the answer is not JSON at all', async () => {
    answer = { status: 200, type: 'text/html', body: '<html>proxy error</html>' };
    const reply = await request(callerUrl, '/');
    assert.equal(reply.status, 502);
    assert.equal(reply.body.detail, 'the ledger answered outside its schema: its 200 answer is not JSON');
  });

  it("reads a refusal's problem detail, else the start of its body", async () => {
    const client = new ServiceClient(peer.url, undefined, 2000);
    answer = { status: 409, type: 'application/problem+json', body: JSON.stringify({ status: 409, detail: 'the key was used before' }) };
    assert.equal((await client.call('GET', '/', { requestId: 'test' })).detail(), 'the key was used before');
    answer = { status: 503, type: 'text/plain', body: 'x'.repeat(400) };
    const reply = await client.call('GET', '/', { requestId: 'test' });
    assert.equal(reply.detail(), 'x'.repeat(300));
    // Unnamed, the peer is its address.
    assert.throws(
      () => reply.json(Balance),
      (error) => error instanceof UnexpectedAnswer && error.status === 502 && error.message.includes(peer.url),
    );
  });
});
