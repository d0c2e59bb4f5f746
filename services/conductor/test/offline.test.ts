import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { documentedRun } from '../../../test/support/stand-ins/simulation-run.ts';
import { BASTILLE, CORONATION, conductorEntries, GATEWAY_KEY, type Platform, README_REQUEST, startPlatform, type User, WATERLOO } from './harness.ts';
import { type SimulationStandIn, startSimulationStandIn } from './simulation-stand-in.ts';

describe('conductor, offline planner', function () {
  this.timeout(120_000);
  let platform: Platform;
  let simulation: SimulationStandIn;

  before(async () => {
    simulation = await startSimulationStandIn();
    platform = await startPlatform({ simulationUrl: simulation.url });
  });
  after(async () => {
    await platform?.stop();
    await simulation?.close();
  });

  it("answers the README's request: a path through the graph, a rendered scene and a simulation, each charged once", async () => {
    const user = await platform.user(50);
    const reply = await platform.send(user, { content: README_REQUEST });
    assert.equal(reply.status, 200, JSON.stringify(reply.body));
    const body = reply.body;
    assert.equal(body.status, 'completed', body.reply);
    assert.equal(body.model.offline, true);
    assert.match(body.reply, /^Offline planner/);
    const tools = body.tools_called.map((call: { tool: string }) => call.tool);
    assert.deepEqual(tools.slice(0, 3).sort(), ['graph_search', 'graph_search', 'graph_search']);
    assert.ok(
      tools.includes('find_path') && tools.includes('render_scene') && tools.includes('start_simulation') && tools.includes('follow_simulation'),
      tools.join(),
    );
    const path = body.tools_called.find((call: { tool: string }) => call.tool === 'find_path');
    assert.deepEqual(path.arguments, { from_path: BASTILLE, to_path: WATERLOO });
    assert.equal(path.output.found, true);
    assert.ok(path.output.nodes.some((node: { id: string }) => node.id === CORONATION));
    const render = body.tools_called.find((call: { tool: string }) => call.tool === 'render_scene');
    assert.equal(render.arguments.query, 'Coronation of Napoleon, 1804');
    assert.equal(render.credits, 2);
    assert.match(render.output.url, /^\/api\/v1\/timepoints\//);
    const started = body.tools_called.find((call: { tool: string }) => call.tool === 'start_simulation');
    assert.equal(started.arguments.mode, 'BRANCHING');
    assert.equal(started.credits, 8);
    assert.equal(simulation.calls[0]?.headers['x-user-id'], user.id);
    assert.equal(body.spend.credits_total, 10);
    assert.equal(body.spend.running_total, 10);
    assert.equal(body.tools_called.at(-1).running_total, 10);
    assert.match(body.reply, /Storming of the Bastille/);
    assert.match(body.reply, /Coronation of Napoleon/);

    const entries = conductorEntries(await platform.history(user), body.message_id);
    assert.equal(
      entries.reduce((sum, entry) => sum + entry.amount, 0),
      -body.spend.credits_total,
    );
    for (const call of body.tools_called.filter((entry: { credits: number }) => entry.credits > 0)) {
      assert.ok(entries.some((entry) => entry.idempotency_key === `service:conductor:${body.message_id}:${call.index}` && entry.amount === -call.credits));
    }
    assert.equal(await platform.balance(user), 40);
  });

  /** The request's ledger entries sum to what its responses say it spent, and each paid call has its own entry. */
  async function assertLedgerMatches(
    user: User,
    messageId: string,
    responses: Array<{ tools_called: Array<{ index: number; credits: number }>; spend: { credits_total: number } }>,
  ) {
    const entries = conductorEntries(await platform.history(user), messageId);
    const spent = responses.reduce((sum, response) => sum + response.spend.credits_total, 0);
    assert.equal(0 - entries.reduce((sum, entry) => sum + entry.amount, 0), spent, JSON.stringify(entries));
    for (const call of responses.flatMap((response) => response.tools_called)) {
      const own = entries.filter((entry) => entry.idempotency_key.endsWith(`conductor:${messageId}:${call.index}`));
      assert.equal(0 - own.reduce((sum, entry) => sum + entry.amount, 0), call.credits, `call ${call.index}`);
    }
  }

  const settings = (user: User, body: Record<string, unknown>) =>
    platform.call('conductor', 'PATCH', '/api/v1/conductor/settings', { headers: user.headers, body });

  describe('settings', () => {
    it('reads the defaults, sets some options and keeps the others, and refuses bad values', async () => {
      const user = await platform.user(10);
      const defaults = await platform.call('conductor', 'GET', '/api/v1/conductor/settings', { headers: user.headers });
      assert.deepEqual(defaults.body, { autonomy: 'act_within_ceiling', verbosity: 'normal', spend_ceiling: 15, default_render: 'text' });
      const changed = await settings(user, { verbosity: 'brief', spend_ceiling: 40 });
      assert.deepEqual(changed.body, { autonomy: 'act_within_ceiling', verbosity: 'brief', spend_ceiling: 40, default_render: 'text' });
      assert.equal((await settings(user, { default_render: 'rich' })).body.spend_ceiling, 40);
      for (const bad of [{ autonomy: 'yolo' }, { spend_ceiling: -1 }, { spend_ceiling: 2.5 }, { spend_ceiling: 10_001 }, { colour: 'red' }, {}]) {
        const refused = await settings(user, bad);
        assert.equal(refused.status, 422, JSON.stringify(bad));
        assert.equal(refused.headers.get('content-type'), 'application/problem+json');
      }
      assert.equal((await platform.call('conductor', 'GET', '/api/v1/conductor/settings', { headers: user.headers })).body.default_render, 'rich');
    });
  });

  describe('the four options', () => {
    it('autonomy ask_before_paid pauses before each paid call; a confirmation runs it, a refusal skips it', async () => {
      const user = await platform.user(50);
      await settings(user, { autonomy: 'ask_before_paid' });
      const first = (await platform.send(user, { content: README_REQUEST })).body;
      assert.equal(first.status, 'paused');
      assert.equal(first.pending.tool, 'render_scene');
      assert.equal(first.pending.reason, 'autonomy');
      assert.equal(first.pending.credits, 2);
      assert.match(first.reply, /Paused before I render the scene "Coronation of Napoleon, 1804".*2 credits/s);
      assert.equal(first.spend.credits_total, 0);
      assert.ok(first.tools_called.every((call: { credits: number }) => call.credits === 0));
      assert.equal(await platform.balance(user), 50);

      const second = (await platform.send(user, { content: 'confirm', conversation_id: first.conversation_id, pending_id: first.pending.id })).body;
      assert.equal(second.message_id, first.message_id);
      assert.equal(second.decision, 'confirm');
      assert.equal(second.status, 'paused');
      assert.equal(second.pending.tool, 'start_simulation');
      assert.deepEqual(
        second.tools_called.map((call: { tool: string; credits: number }) => [call.tool, call.credits]),
        [['render_scene', 2]],
      );
      assert.equal(second.spend.running_total, 2);

      const third = (
        await platform.send(user, {
          content: 'skip the simulation',
          conversation_id: first.conversation_id,
          decision: 'decline',
          pending_id: second.pending.id,
        })
      ).body;
      assert.equal(third.status, 'completed');
      assert.match(third.reply, /As you declined, I did not start a BRANCHING simulation/);
      assert.equal(
        third.tools_called.some((call: { tool: string }) => call.tool === 'start_simulation'),
        false,
      );
      assert.equal(third.spend.running_total, 2);
      await assertLedgerMatches(user, first.message_id, [first, second, third]);
      assert.equal(await platform.balance(user), 48);
    });

    it('autonomy ask_once asks before the first paid call only', async () => {
      const user = await platform.user(50);
      await settings(user, { autonomy: 'ask_once' });
      const first = (await platform.send(user, { content: README_REQUEST })).body;
      assert.equal(first.pending.tool, 'render_scene');
      const second = (await platform.send(user, { content: 'yes', conversation_id: first.conversation_id, pending_id: first.pending.id })).body;
      assert.equal(second.status, 'completed');
      assert.deepEqual(
        second.tools_called.filter((call: { credits: number }) => call.credits > 0).map((call: { tool: string }) => call.tool),
        ['render_scene', 'start_simulation'],
      );
      assert.equal(second.spend.running_total, 10);
      await assertLedgerMatches(user, first.message_id, [first, second]);
    });

    it('the spend ceiling pauses before a call that would pass it, saying what it would do and cost; a confirmation goes past it', async () => {
      const user = await platform.user(50);
      await settings(user, { spend_ceiling: 5 });
      const first = (await platform.send(user, { content: README_REQUEST })).body;
      assert.equal(first.status, 'paused');
      assert.equal(first.spend.credits_total, 2);
      assert.deepEqual(first.pending, {
        id: first.pending.id,
        index: first.pending.index,
        tool: 'start_simulation',
        action: first.pending.action,
        credits: 8,
        operation: 'simulation.fidelity-3',
        reason: 'ceiling',
        running_total_after: 10,
        ceiling: 5,
      });
      assert.match(first.reply, /start a BRANCHING simulation at fidelity 3.*costs 8 credits.*10 credits, past your spend ceiling of 5 credits/s);
      const paused = await platform.call('conductor', 'GET', `/api/v1/conductor/conversations/${first.conversation_id}`, { headers: user.headers });
      assert.equal(paused.body.messages[0].status, 'paused');
      assert.equal(paused.body.messages[0].pending.tool, 'start_simulation');
      assert.equal(paused.body.messages[0].pending.id, first.pending.id);

      const second = (await platform.send(user, { content: 'Go ahead', conversation_id: first.conversation_id, pending_id: first.pending.id })).body;
      assert.equal(second.status, 'completed');
      assert.equal(second.spend.credits_total, 8);
      assert.equal(second.spend.running_total, 10);
      assert.equal(second.tools_called.find((call: { tool: string }) => call.tool === 'start_simulation').running_total, 10);
      await assertLedgerMatches(user, first.message_id, [first, second]);
      assert.equal(await platform.balance(user), 40);
    });

    it('verbosity changes the reply', async () => {
      const user = await platform.user(50);
      const replies: Record<string, string> = {};
      for (const verbosity of ['brief', 'normal', 'detailed']) {
        await settings(user, { verbosity });
        replies[verbosity] = (await platform.send(user, { content: 'Show me what led from the Bastille to Waterloo' })).body.reply;
      }
      assert.match(replies.brief!, /^\[offline\] Storming of the Bastille \(1789\) → Battle of Waterloo \(1815\): 2 hops\.$/);
      assert.match(replies.normal!, /Storming of the Bastille \(1789\) → Coronation of Napoleon \(1804\) → Battle of Waterloo/);
      assert.match(replies.normal!, /Credits: 0 credits spent/);
      assert.ok(replies.detailed!.length > replies.normal!.length && replies.normal!.length > replies.brief!.length);
      assert.match(replies.detailed!, /\n {2}- \/1789\/july\/14\/1530\/france\/ile-de-france\/paris\/storming-of-the-bastille [a-z_]+ \/1804\//);
    });

    it('default render decides whether scenes come with images, and what they cost', async () => {
      const user = await platform.user(50);
      const text = (await platform.send(user, { content: 'Render the coronation of 1804' })).body;
      const plain = text.tools_called.find((call: { tool: string }) => call.tool === 'render_scene');
      assert.equal(plain.arguments.generate_image, false);
      assert.equal(plain.credits, 2);
      assert.equal(plain.output.image_url, null);
      await settings(user, { default_render: 'rich' });
      const rich = (await platform.send(user, { content: 'Render the coronation of 1804' })).body;
      const imaged = rich.tools_called.find((call: { tool: string }) => call.tool === 'render_scene');
      assert.equal(imaged.arguments.generate_image, true);
      assert.equal(imaged.credits, 4);
      assert.match(imaged.output.image_url, /\/image$/);
      assert.match(rich.reply, /, image \S+\/image\./);
      // The request's own words win over the default.
      const asked = (await platform.send(user, { content: 'Render the coronation of 1804 without an image' })).body;
      assert.equal(asked.tools_called.find((call: { tool: string }) => call.tool === 'render_scene').credits, 2);
      await assertLedgerMatches(user, rich.message_id, [rich]);
    });

    it('pauses rather than overdraw when the balance is short, and says what is available', async () => {
      const user = await platform.user(5);
      const reply = (await platform.send(user, { content: README_REQUEST })).body;
      assert.equal(reply.status, 'paused');
      assert.equal(reply.pending.reason, 'balance');
      assert.equal(reply.pending.available, 3);
      assert.match(reply.reply, /your balance is 3 credits/);
      assert.equal(await platform.balance(user), 3);
    });
  });

  describe('refunds', () => {
    it('refunds a paid call that fails (the simulation service refuses), and tells why', async () => {
      const user = await platform.user(50);
      simulation.startStatus = 503;
      try {
        const reply = (await platform.send(user, { content: 'Simulate what would have happened had the Continental System failed in 1807' })).body;
        const started = reply.tools_called.find((call: { tool: string }) => call.tool === 'start_simulation');
        assert.equal(started.status, 'failed');
        assert.equal(started.credits, 0);
        assert.match(started.note, /answered 503.*refunded 8 credits/);
        assert.match(reply.reply, /could not be started/);
        const entries = conductorEntries(await platform.history(user), reply.message_id);
        assert.deepEqual(entries.map((entry) => [entry.kind, entry.amount]).sort(), [
          ['charge', -8],
          ['refund', 8],
        ]);
        assert.equal(await platform.balance(user), 50);
      } finally {
        simulation.startStatus = 202;
      }
    });

    it("refunds a paid call whose answer is outside the simulation service's schema, naming the mismatch, and passes nothing of it on", async () => {
      const user = await platform.user(50);
      simulation.startBody = { ...documentedRun(randomUUID(), {}), id: 42, injected: 'not for the model' };
      try {
        const reply = (await platform.send(user, { content: 'Simulate what would have happened had the Continental System failed in 1807' })).body;
        assert.equal(reply.status, 'completed');
        const started = reply.tools_called.find((call: { tool: string }) => call.tool === 'start_simulation');
        assert.equal(started.status, 'failed');
        assert.equal(started.credits, 0);
        assert.equal(started.output, null);
        // A failure the conductor expects (the tool's own), not "the tool failed unexpectedly".
        assert.match(started.note, /^failed: the simulation service answered outside its schema: \/id must be string \(its 202 answer\); refunded 8 credits$/);
        assert.match(reply.reply, /could not be started: the simulation service answered outside its schema/);
        assert.doesNotMatch(JSON.stringify(reply), /not for the model/);
        assert.equal(await platform.balance(user), 50);
      } finally {
        simulation.startBody = undefined;
      }
    });

    it('refunds when the simulation service is not there at all', async () => {
      const user = await platform.user(50);
      simulation.down = true;
      try {
        const reply = (await platform.send(user, { content: README_REQUEST })).body;
        assert.equal(reply.status, 'completed');
        const started = reply.tools_called.find((call: { tool: string }) => call.tool === 'start_simulation');
        assert.match(started.note, /could not be reached.*refunded 8 credits/);
        assert.equal(reply.spend.credits_total, 2);
        await assertLedgerMatches(user, reply.message_id, [reply]);
        assert.equal(await platform.balance(user), 48);
      } finally {
        simulation.down = false;
      }
    });
  });

  it('never overspends the balance when one user sends many messages at once', async () => {
    const user = await platform.user(21);
    const replies = await Promise.all(Array.from({ length: 6 }, () => platform.send(user, { content: README_REQUEST })));
    assert.ok(replies.every((reply) => reply.status === 200));
    const spent = replies.reduce((sum, reply) => sum + reply.body.spend.credits_total, 0);
    const balance = await platform.balance(user);
    assert.ok(balance >= 0);
    assert.equal(spent, 21 - balance);
    assert.ok(spent >= 20, `spent ${spent}`);
    for (const reply of replies) await assertLedgerMatches(user, reply.body.message_id, [reply.body]);
    assert.ok(replies.some((reply) => reply.body.pending?.reason === 'balance'));
  });

  it('keeps conversations: a follow-up refers back to what came before', async () => {
    const user = await platform.user(50);
    const first = (await platform.send(user, { content: 'Tell me about the storming of the Bastille' })).body;
    assert.match(first.reply, /Storming of the Bastille \(1789\)/);
    const second = (await platform.send(user, { content: 'Render it', conversation_id: first.conversation_id })).body;
    assert.equal(second.conversation_id, first.conversation_id);
    assert.equal(second.tools_called[0].tool, 'render_scene');
    assert.equal(second.tools_called[0].arguments.query, 'Storming of the Bastille, 1789');
    const conversation = (await platform.call('conductor', 'GET', `/api/v1/conductor/conversations/${first.conversation_id}`, { headers: user.headers })).body;
    assert.deepEqual(
      conversation.messages.map((message: { content: string }) => message.content),
      ['Tell me about the storming of the Bastille', 'Render it'],
    );
    assert.equal(conversation.messages[1].tools_called[0].credits, 2);
    const list = (await platform.call('conductor', 'GET', '/api/v1/conductor/conversations', { headers: user.headers })).body;
    assert.equal(list.items[0].id, first.conversation_id);
    const other = await platform.user(1);
    assert.equal((await platform.call('conductor', 'GET', `/api/v1/conductor/conversations/${first.conversation_id}`, { headers: other.headers })).status, 404);
    assert.equal(
      (await platform.call('conductor', 'DELETE', `/api/v1/conductor/conversations/${first.conversation_id}`, { headers: user.headers })).status,
      204,
    );
    assert.equal((await platform.call('conductor', 'GET', `/api/v1/conductor/conversations/${first.conversation_id}`, { headers: user.headers })).status, 404);
  });

  it('settles what a stopped process left: a charged call that never ended is refunded, an uncharged one is closed', async () => {
    const user = await platform.user(50);
    const message = (await platform.send(user, { content: 'Tell me about Waterloo' })).body.message_id as string;
    const key = (index: number) => `conductor:${message}:${index}`;
    // Call 7 was charged and its process died before it ended; call 8 died before its charge was booked.
    const charged = await platform.call('gateway', 'POST', '/api/v1/credits/charge', {
      headers: { 'X-Service-Key': GATEWAY_KEY },
      body: { user_id: user.id, amount: 8, operation: 'simulation.fidelity-3', idempotency_key: key(7) },
    });
    assert.equal(charged.status, 201);
    const db = new pg.Client({ connectionString: platform.conductor.databaseUrl });
    await db.connect();
    try {
      for (const index of [7, 8]) {
        await db.query(
          `insert into conductor_tool_calls (message_id, index, user_id, tool, arguments, status, credits, operation, idempotency_key, updated_at)
           values ($1, $2, $3, 'start_simulation', '{}', 'charging', 8, 'simulation.fidelity-3', $4, now() - interval '1 hour')`,
          [message, index, user.id, key(index)],
        );
      }
      assert.equal(await platform.balance(user), 42);
      assert.equal(await platform.conductor.instance.service.settleUnsettled('test-settle'), 2);
      assert.equal(await platform.balance(user), 50);
      const rows = (
        await db.query('select index, status, credits, note from conductor_tool_calls where message_id = $1 and index in (7, 8) order by index', [message])
      ).rows;
      assert.deepEqual(
        rows.map((row) => [row.status, row.credits]),
        [
          ['failed', 0],
          ['failed', 0],
        ],
      );
      assert.match(rows[0].note, /refunded/);
      assert.match(rows[1].note, /never charged/);
      assert.equal(await platform.conductor.instance.service.settleUnsettled('test-settle'), 0);
    } finally {
      await db.end();
    }
  });
});
