import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { generateKeyPair, SignJWT } from 'jose';
import { pythonTool } from '../../../test/support/python.ts';
import { waitFor } from '../../../test/support/wait.ts';
import { scrape } from '../../kit/test/metrics-support.ts';
import { asUser, SERVICE_KEY as SIMULATION_KEY, type SimulationHarness, startSimulation } from '../../simulation/test/harness.ts';
import { ADMIN_KEY, CONDUCTOR_KEY, conductorEntries, mcpClient, type Platform, README_REQUEST, startPlatform, type ToolReply, type User } from './harness.ts';

const execFileAsync = promisify(execFile);

describe('conductor access: credentials, bad input, the gateway route, MCP', function () {
  this.timeout(120_000);
  let platform: Platform;
  let simulation: SimulationHarness;
  let user: User;
  const post = (headers: Record<string, string>, body: unknown) => platform.call('conductor', 'POST', '/api/v1/conductor/messages', { headers, body });

  before(async () => {
    simulation = await startSimulation();
    platform = await startPlatform({ simulationUrl: simulation.url, simulationKey: SIMULATION_KEY });
    user = await platform.user(500);
  });
  after(async () => {
    await platform?.stop();
    await simulation?.stop();
  });

  async function assertSpent(customer: User, reply: { message_id: string; spend: { credits_total: number } }, credits: number) {
    assert.equal(reply.spend.credits_total, credits);
    const entries = conductorEntries(await platform.history(customer), reply.message_id);
    assert.equal(0 - entries.reduce((sum, entry) => sum + entry.amount, 0), credits);
  }

  describe('credentials', () => {
    it('refuses a request without one, with a Bearer challenge', async () => {
      const reply = await post({}, { content: 'Tell me about Waterloo' });
      assert.equal(reply.status, 401);
      assert.match(reply.headers.get('www-authenticate') ?? '', /Bearer/);
      assert.equal(reply.headers.get('content-type'), 'application/problem+json');
    });

    it('refuses malformed, forged and foreign tokens', async () => {
      const { privateKey } = await generateKeyPair('ES256');
      const forged = await new SignJWT({ tier: 'pro' })
        .setProtectedHeader({ alg: 'ES256', kid: 'not-the-gateways' })
        .setSubject(user.id)
        .setJti('forged')
        .setIssuer('tempora-gateway')
        .setAudience('tempora')
        .setIssuedAt()
        .setExpirationTime('5m')
        .sign(privateKey);
      const [, payload] = user.token.split('.');
      const none = `${Buffer.from(JSON.stringify({ alg: 'none', typ: 'JWT' })).toString('base64url')}.${payload}.`;
      for (const authorization of ['Bearer', 'Basic abc', `Bearer ${forged}`, `Bearer ${none}`, `Bearer ${user.token}x`]) {
        const reply = await post({ Authorization: authorization }, { content: 'Tell me about Waterloo' });
        assert.equal(reply.status, 401, authorization.slice(0, 20));
        assert.match(reply.headers.get('www-authenticate') ?? '', /invalid_token/);
      }
    });

    it('stops accepting a token as soon as its user signs out (introspection at the gateway)', async () => {
      const leaving = await platform.user(10);
      assert.equal((await platform.call('conductor', 'GET', '/api/v1/conductor/settings', { headers: leaving.headers })).status, 200);
      assert.equal((await platform.call('gateway', 'POST', '/api/v1/auth/logout', { headers: leaving.headers, body: {} })).status, 204);
      const refused = await platform.call('conductor', 'GET', '/api/v1/conductor/settings', { headers: leaving.headers });
      assert.equal(refused.status, 401);
      assert.match(refused.body.detail, /no longer active/);
    });

    it('takes a service credential only with the user it acts for', async () => {
      const service = { 'X-Service-Key': CONDUCTOR_KEY };
      assert.equal((await post(service, { content: 'Tell me about Waterloo' })).status, 403);
      assert.equal((await post({ ...service, 'X-User-ID': 'someone' }, { content: 'Tell me about Waterloo' })).status, 401, 'X-User-ID is a user id (a UUID)');
      assert.equal((await post({ 'X-User-ID': user.id }, { content: 'Tell me about Waterloo' })).status, 401, 'X-User-ID without a service credential');
      assert.equal((await post({ 'X-Service-Key': 'wrong-key-0123456789', 'X-User-ID': user.id }, { content: 'Tell me about Waterloo' })).status, 401);
      const acting = await post({ ...service, 'X-User-ID': user.id }, { content: 'Tell me about Waterloo' });
      assert.equal(acting.status, 200);
      assert.match(acting.body.reply, /Battle of Waterloo/);
      const issued = await platform.call('gateway', 'POST', '/api/v1/auth/service-token', {
        headers: { 'X-Admin-Key': ADMIN_KEY },
        body: { service: 'billing' },
      });
      const token = { Authorization: `Bearer ${issued.body.access_token ?? issued.body.token}` };
      assert.equal((await post(token, { content: 'Tell me about Waterloo' })).status, 403);
      assert.equal((await post({ ...token, 'X-User-ID': user.id }, { content: 'Tell me about Waterloo' })).status, 200);
    });
  });

  describe('bad input', () => {
    it('answers clear problems, never a 500', async () => {
      const cases: Array<[unknown, number, RegExp]> = [
        [{}, 422, /body.content/],
        [{ content: '' }, 422, /body.content/],
        [{ content: 'x'.repeat(4001) }, 422, /body.content/],
        [{ content: 42 }, 422, /body.content/],
        [{ content: 'hello\u0000' }, 422, /body.content/],
        [{ content: 'hello', conversation_id: 'not-a-uuid' }, 422, /body.conversation_id/],
        [{ content: 'hello', decision: 'maybe', conversation_id: '00000000-0000-4000-8000-000000000000' }, 422, /body.decision/],
        [{ content: 'yes', decision: 'confirm' }, 422, /body.decision/],
        [{ content: 'yes', decision: 'confirm', conversation_id: '00000000-0000-4000-8000-000000000000' }, 422, /body.pending_id.*pending\.id/],
        [{ content: 'yes', decision: 'confirm', conversation_id: '00000000-0000-4000-8000-000000000000', pending_id: 'nope' }, 422, /body.pending_id/],
        [{ content: 'yes', pending_id: '00000000-0000-4000-8000-000000000000' }, 422, /body.pending_id.*conversation_id/],
        [
          { content: 'render it', conversation_id: '00000000-0000-4000-8000-000000000000', pending_id: '00000000-0000-4000-8000-000000000000' },
          422,
          /body.pending_id.*comes with a decision/,
        ],
        [{ content: 'hello', conversation_id: '00000000-0000-4000-8000-000000000000' }, 404, /no conversation/],
      ];
      for (const [body, status, detail] of cases) {
        const reply = await post(user.headers, body);
        assert.equal(reply.status, status, JSON.stringify(body).slice(0, 80));
        assert.match(JSON.stringify(reply.body), detail);
      }
      const raw = await fetch(`${platform.conductor.url}/api/v1/conductor/messages`, {
        method: 'POST',
        headers: { ...user.headers, 'content-type': 'application/json' },
        body: '{"content":',
      });
      assert.equal(raw.status, 400);
    });

    it('answers a decision naming no paused call with 404, and one conversation one message at a time', async () => {
      const first = (await post(user.headers, { content: 'Tell me about Waterloo' })).body;
      const decided = await post(user.headers, {
        content: 'yes',
        decision: 'confirm',
        conversation_id: first.conversation_id,
        pending_id: '00000000-0000-4000-8000-000000000000',
      });
      assert.equal(decided.status, 404);
      assert.match(decided.body.detail, /no paused call/);
      const both = await Promise.all([0, 1].map(() => post(user.headers, { content: README_REQUEST, conversation_id: first.conversation_id })));
      assert.deepEqual(both.map((reply) => reply.status).sort(), [200, 409]);
    });
  });

  it('is reached through the gateway as well, charged once per call', async () => {
    const customer = await platform.user(50);
    const reply = await platform.call('gateway', 'POST', '/api/v1/conductor/messages', { headers: customer.headers, body: { content: README_REQUEST } });
    assert.equal(reply.status, 200, JSON.stringify(reply.body));
    assert.equal(reply.body.status, 'completed');
    const history = await platform.history(customer);
    const entries = conductorEntries(history, reply.body.message_id);
    assert.equal(0 - entries.reduce((sum, entry) => sum + entry.amount, 0), reply.body.spend.credits_total);
    assert.equal(reply.body.spend.credits_total, 10);
    // Nothing else: the gateway charges no fee for the message itself.
    const others = history.filter(
      (entry) => !entry.idempotency_key.includes('conductor:') && entry.kind !== 'grant' && entry.kind !== 'signup_grant' && entry.operation !== 'test.setup',
    );
    assert.deepEqual(others, []);
    assert.equal(await platform.balance(customer), 50 - 10);
    const settings = await platform.call('gateway', 'PATCH', '/api/v1/conductor/settings', { headers: customer.headers, body: { verbosity: 'brief' } });
    assert.equal(settings.body.verbosity, 'brief');
    assert.equal((await platform.call('conductor', 'GET', '/api/v1/conductor/settings', { headers: customer.headers })).body.verbosity, 'brief');
  });

  it('starts, follows and summarizes a simulation in the simulation service, as the user', async () => {
    const customer = await platform.user(50);
    const started = (await post(customer.headers, { content: 'Simulate what would have happened had the Continental System failed in 1807' })).body;
    const run = started.tools_called.find((call: { tool: string }) => call.tool === 'start_simulation');
    assert.equal(run.status, 'ok', run.note);
    assert.equal(run.credits, 8);
    const id = run.output.id as string;
    const own = await simulation.call('GET', `/api/v1/simulations/${id}`, { headers: asUser(customer.id) });
    assert.equal(own.status, 200);
    assert.equal(own.body.mode, 'BRANCHING');
    assert.equal(own.body.fidelity, 3);
    const followed = started.tools_called.find((call: { tool: string }) => call.tool === 'follow_simulation');
    assert.equal(followed.output.id, id);
    await waitFor(
      'the simulation to end',
      async () =>
        ['completed', 'stopped', 'failed', 'cancelled'].includes(
          (await simulation.call('GET', `/api/v1/simulations/${id}`, { headers: asUser(customer.id) })).body.status,
        ),
      { timeoutMs: 30_000, intervalMs: 100 },
    );
    const summary = (await post(customer.headers, { content: 'Summarize the results of the simulation', conversation_id: started.conversation_id })).body;
    const summarized = summary.tools_called.find((call: { tool: string }) => call.tool === 'summarize_simulation');
    assert.equal(summarized.status, 'ok', summarized.note);
    assert.equal(summarized.arguments.simulation_id, id);
    assert.ok(summarized.output.entities_count > 0);
    assert.match(summary.reply, new RegExp(`Simulation ${id} completed`));
    await assertSpent(customer, started, 8);
  });

  describe('MCP', () => {
    it('offers converse, answering with the same structured reply', async () => {
      const customer = await platform.user(50);
      const client = await mcpClient(platform.conductor.url, customer.headers);
      try {
        const { tools } = await client.listTools();
        assert.deepEqual(
          tools.map((tool) => tool.name),
          ['converse'],
        );
        assert.deepEqual(tools[0]!.inputSchema.required, ['content']);
        const reply = (await client.callTool({ name: 'converse', arguments: { content: README_REQUEST } })) as ToolReply;
        assert.equal(reply.isError, undefined);
        const body = reply.structuredContent;
        assert.equal(body.status, 'completed');
        assert.equal(body.spend.credits_total, 10);
        assert.deepEqual(JSON.parse(reply.content[0]!.text), body);
        const entries = conductorEntries(await platform.history(customer), body.message_id);
        assert.equal(0 - entries.reduce((sum, entry) => sum + entry.amount, 0), 10);
        const followUp = (await client.callTool({
          name: 'converse',
          arguments: { content: 'What is my balance?', conversation_id: body.conversation_id },
        })) as ToolReply;
        assert.match(followUp.structuredContent.reply, /Your balance is 40 credits/);
      } finally {
        await client.close();
      }
    });

    it('answers invalid input with error and suggestion instead of failing', async () => {
      const client = await mcpClient(platform.conductor.url, user.headers);
      try {
        for (const args of [
          {},
          { content: '' },
          { content: 'x'.repeat(4001) },
          { content: 7 },
          { content: 'hi', conversation_id: 'nope' },
          { content: 'hi', conversation_id: '00000000-0000-4000-8000-000000000000' },
        ]) {
          const reply = (await client.callTool({ name: 'converse', arguments: args })) as ToolReply;
          assert.equal(reply.isError, true, JSON.stringify(args).slice(0, 60));
          assert.equal(typeof reply.structuredContent.error, 'string');
          assert.ok(reply.structuredContent.suggestion.length > 10);
        }
      } finally {
        await client.close();
      }
    });

    it("is on the public host too: the official client through the gateway, with the Bearer token, as the graph's", async () => {
      const customer = await platform.user(50);
      const client = await mcpClient(`${platform.gateway.url}/api/v1/conductor`, customer.headers);
      try {
        assert.deepEqual(
          (await client.listTools()).tools.map((tool) => tool.name),
          ['converse'],
        );
        const reply = (await client.callTool({ name: 'converse', arguments: { content: README_REQUEST } })) as ToolReply;
        assert.equal(reply.isError, undefined, JSON.stringify(reply.structuredContent));
        assert.equal(reply.structuredContent.spend.credits_total, 10);
        const entries = conductorEntries(await platform.history(customer), reply.structuredContent.message_id);
        assert.equal(0 - entries.reduce((sum, entry) => sum + entry.amount, 0), 10, 'charged once, by the conductor, as on its own port');
        assert.equal(await platform.balance(customer), 40);
      } finally {
        await client.close();
      }
      const initialize = {
        jsonrpc: '2.0',
        id: 1,
        method: 'initialize',
        params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } },
      };
      const post = (headers: Record<string, string>) =>
        fetch(`${platform.gateway.url}/api/v1/conductor/mcp`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
          body: JSON.stringify(initialize),
        });
      assert.equal((await post({})).status, 401, 'no credential');
      const readKey = (
        await platform.call('gateway', 'POST', '/api/v1/users/me/api-keys', { headers: customer.headers, body: { name: 'r', scopes: ['read'] } })
      ).body.key as string;
      assert.equal((await post({ 'X-API-Key': readKey })).status, 403, 'converse spends credits: a read-only key may not');
    });

    it('answers the official Python client through the gateway alike', async function () {
      this.timeout(600_000);
      const python = pythonTool('mcp-client', ['mcp==1.22.0']);
      const customer = await platform.user(50);
      const token = customer.headers.Authorization!.replace(/^Bearer /, '');
      const script = fileURLToPath(new URL('./mcp_client.py', import.meta.url));
      const { stdout } = await execFileAsync(python.bin('python'), [script, `${platform.gateway.url}/api/v1/conductor/mcp`, token, README_REQUEST], {
        timeout: 120_000,
      });
      const reply = JSON.parse(stdout.trim().split('\n').pop()!);
      assert.deepEqual([reply.server, reply.tools, reply.is_error], ['tempora-conductor', ['converse'], false]);
      assert.equal(reply.structured.spend.credits_total, 10);
      assert.equal(await platform.balance(customer), 40);
    });

    it("needs the user's access token", async () => {
      const response = await fetch(`${platform.conductor.url}/mcp`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
        body: JSON.stringify({
          jsonrpc: '2.0',
          id: 1,
          method: 'initialize',
          params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } },
        }),
      });
      assert.equal(response.status, 401);
      assert.match(response.headers.get('www-authenticate') ?? '', /Bearer/);
      assert.equal((await fetch(`${platform.conductor.url}/mcp`, { headers: user.headers })).status, 405);
    });
  });

  it('serves health, metrics and its OpenAPI document', async () => {
    const health = await platform.call('conductor', 'GET', '/health');
    assert.equal(health.status, 200);
    assert.equal(health.body.service, 'conductor');
    assert.deepEqual(health.body.model, { provider: 'offline', model: 'offline' });
    const metrics = await scrape(platform.conductor.server);
    assert.match(metrics, /conductor_tool_calls_total\{[^}]*tool="graph_search"[^}]*status="ok"[^}]*\} [1-9]/);
    assert.match(metrics, /conductor_credits_charged_total\{[^}]*operation="generation.balanced"[^}]*\} [1-9]/);
    const openapi = (await platform.call('conductor', 'GET', '/openapi.json')).body;
    assert.ok(openapi.paths['/api/v1/conductor/messages'].post);
    assert.ok(openapi.paths['/api/v1/conductor/settings'].patch);
  });
});
