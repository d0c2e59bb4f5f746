import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openDatabase } from '@tempora/kit/data';
import { createLogger } from '@tempora/kit/observability';
import { migrations } from '../src/migrations.ts';
import { ConductorRepository } from '../src/repository.ts';
import { conductorEntries, mcpClient, type Platform, README_REQUEST, startPlatform, type ToolReply, type User } from './harness.ts';
import { type SimulationStandIn, startSimulationStandIn } from './simulation-stand-in.ts';

const SIMULATE = 'Simulate what would have happened had the Continental System failed in 1807';
const UNKNOWN = '00000000-0000-4000-8000-000000000000';

/** A decision answers the paused call its sender was shown, once: never another call, never twice. */
describe('conductor confirmations', function () {
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

  /** The runs the simulation stand-in was asked to start for `user`. */
  const started = (user: User) =>
    simulation.calls.filter((call) => call.method === 'POST' && call.path === '/api/v1/simulate' && call.headers['x-user-id'] === user.id).length;

  /** A user who is asked before every paid call. */
  async function askingUser(credits: number) {
    const user = await platform.user(credits);
    assert.equal(
      (await platform.call('conductor', 'PATCH', '/api/v1/conductor/settings', { headers: user.headers, body: { autonomy: 'ask_before_paid' } })).status,
      200,
    );
    return user;
  }

  /** Such a user, with `request` paused before its first paid call. */
  async function pausedRequest(credits: number, request = SIMULATE) {
    const user = await askingUser(credits);
    const paused = (await platform.send(user, { content: request })).body;
    assert.equal(paused.status, 'paused', paused.reply);
    assert.match(paused.pending.id, /^[0-9a-f-]{36}$/);
    return { user, paused };
  }

  async function pendingOf(user: User, conversationId: string) {
    const conversation = (await platform.call('conductor', 'GET', `/api/v1/conductor/conversations/${conversationId}`, { headers: user.headers })).body;
    const last = conversation.messages.at(-1);
    return { status: last.status as string, pending: last.pending as { id: string; tool: string } | null };
  }

  it("refuses a confirmation without the paused call's id, with an unknown one or another conversation's, running and charging nothing", async () => {
    const { user, paused } = await pausedRequest(50);
    assert.equal(paused.pending.tool, 'start_simulation');
    const other = (await platform.send(user, { content: SIMULATE })).body;
    assert.equal(other.status, 'paused');
    const conversation_id = paused.conversation_id;

    const unnamed = await platform.send(user, { content: 'confirm', decision: 'confirm', conversation_id });
    assert.equal(unnamed.status, 422);
    assert.match(JSON.stringify(unnamed.body), /body\.pending_id/);
    const yes = await platform.send(user, { content: 'yes', conversation_id });
    assert.equal(yes.status, 409);
    assert.equal(yes.headers.get('content-type'), 'application/problem+json');
    assert.match(yes.body.detail, /names the paused call it answers.*pending_id/);
    for (const pending_id of [UNKNOWN, other.pending.id]) {
      const wrong = await platform.send(user, { content: 'yes', decision: 'confirm', conversation_id, pending_id });
      assert.equal(wrong.status, 404, pending_id);
      assert.match(wrong.body.detail, /no paused call/);
    }
    assert.equal(started(user), 0);
    assert.equal(await platform.balance(user), 50);
    // The refusals leave the call waiting, for the confirmation that names it.
    assert.deepEqual(await pendingOf(user, conversation_id), { status: 'paused', pending: paused.pending });

    const confirmed = await platform.send(user, { content: 'yes', conversation_id, pending_id: paused.pending.id });
    assert.equal(confirmed.status, 200, JSON.stringify(confirmed.body));
    assert.equal(confirmed.body.status, 'completed');
    assert.equal(confirmed.body.decision, 'confirm');
    assert.equal(started(user), 1);
    assert.equal(await platform.balance(user), 42);
  });

  it('refuses a second confirmation of the same call: it ran once and was charged once', async () => {
    const { user, paused } = await pausedRequest(50);
    const body = { content: 'yes', decision: 'confirm', conversation_id: paused.conversation_id, pending_id: paused.pending.id };
    const first = await platform.send(user, body);
    assert.equal(first.status, 200);
    assert.equal(first.body.status, 'completed');
    for (const again of [body, { ...body, decision: 'decline' }, { content: 'yes', conversation_id: paused.conversation_id, pending_id: paused.pending.id }]) {
      const repeated = await platform.send(user, again);
      assert.equal(repeated.status, 409, JSON.stringify(again));
      assert.match(repeated.body.detail, /not waiting for a decision \(it was confirmed\); nothing was run or charged/);
    }
    assert.equal(started(user), 1);
    assert.equal(await platform.balance(user), 42);
    const entries = conductorEntries(await platform.history(user), paused.message_id);
    assert.deepEqual(
      entries.map((entry) => [entry.kind, entry.amount]),
      [['charge', -8]],
    );
  });

  it('never lets an earlier confirmation approve a later paid call', async () => {
    const { user, paused: first } = await pausedRequest(50, README_REQUEST);
    assert.equal(first.pending.tool, 'render_scene');
    const conversation_id = first.conversation_id;
    const second = (await platform.send(user, { content: 'confirm', decision: 'confirm', conversation_id, pending_id: first.pending.id })).body;
    assert.equal(second.status, 'paused');
    assert.equal(second.pending.tool, 'start_simulation');
    assert.notEqual(second.pending.id, first.pending.id);
    assert.equal(await platform.balance(user), 48);

    // The first confirmation again (a retry, a double click, a repeated "yes"): the simulation waits on.
    for (const replay of [
      { content: 'confirm', decision: 'confirm', conversation_id, pending_id: first.pending.id },
      { content: 'yes', conversation_id, pending_id: first.pending.id },
      { content: 'yes', conversation_id },
    ]) {
      assert.equal((await platform.send(user, replay)).status, 409, JSON.stringify(replay));
    }
    assert.equal(started(user), 0);
    assert.equal(await platform.balance(user), 48);
    assert.deepEqual(await pendingOf(user, conversation_id), { status: 'paused', pending: second.pending });

    const third = (await platform.send(user, { content: 'yes', conversation_id, pending_id: second.pending.id })).body;
    assert.equal(third.status, 'completed');
    assert.deepEqual(
      third.tools_called.filter((call: { credits: number }) => call.credits > 0).map((call: { tool: string }) => call.tool),
      ['start_simulation'],
    );
    assert.equal(started(user), 1);
    assert.equal(await platform.balance(user), 40);
    const entries = conductorEntries(await platform.history(user), first.message_id);
    assert.equal(
      entries.reduce((sum, entry) => sum + entry.amount, 0),
      -(first.spend.credits_total + second.spend.credits_total + third.spend.credits_total),
    );
  });

  it('runs a call once when two confirmations of it race', async () => {
    const { user, paused } = await pausedRequest(50);
    const body = { content: 'yes', decision: 'confirm', conversation_id: paused.conversation_id, pending_id: paused.pending.id };
    const replies = await Promise.all([0, 1].map(() => platform.send(user, body)));
    assert.deepEqual(replies.map((reply) => reply.status).sort(), [200, 409]);
    assert.equal(replies.find((reply) => reply.status === 200)!.body.status, 'completed');
    assert.equal(started(user), 1);
    assert.equal(await platform.balance(user), 42);
    const entries = conductorEntries(await platform.history(user), paused.message_id);
    assert.deepEqual(
      entries.map((entry) => [entry.kind, entry.amount]),
      [['charge', -8]],
    );
  });

  it('claims a paused call for one decision only, however many claim it at once (the repository)', async () => {
    const { paused } = await pausedRequest(50);
    const dataDir = mkdtempSync(join(tmpdir(), 'conductor-claims-'));
    const database = await openDatabase({
      service: 'conductor',
      url: platform.conductor.databaseUrl,
      dataDir,
      migrations,
      logger: createLogger('conductor', 'silent'),
    });
    try {
      const repository = new ConductorRepository(database.knex);
      const claims = await Promise.all(
        Array.from({ length: 8 }, (_, n) => repository.claimPause(paused.conversation_id, paused.pending.id, n % 2 ? 'decline' : 'confirm')),
      );
      const winners = claims.flatMap((claim, n) => (claim.message ? [n] : []));
      assert.equal(winners.length, 1);
      const winner = claims[winners[0]!]!.message!;
      assert.equal(winner.id, paused.message_id);
      assert.equal(winner.status, 'running');
      // Every other claim finds the call decided as the winner decided it.
      const decided = winners[0]! % 2 ? 'declined' : 'confirmed';
      assert.deepEqual(
        claims.filter((claim) => !claim.message).map((claim) => claim.state),
        Array(7).fill(decided),
      );
      assert.deepEqual(await repository.claimPause(paused.conversation_id, UNKNOWN, 'confirm'), { state: undefined });
    } finally {
      await database.close();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });

  it('leaves a paused call undecidable once a new request comes instead of a decision', async () => {
    const { user, paused } = await pausedRequest(50);
    const instead = (await platform.send(user, { content: 'What is my balance?', conversation_id: paused.conversation_id })).body;
    assert.equal(instead.status, 'completed');
    const late = await platform.send(user, { content: 'yes', conversation_id: paused.conversation_id, pending_id: paused.pending.id });
    assert.equal(late.status, 409);
    assert.match(late.body.detail, /it was superseded/);
    assert.equal(started(user), 0);
    assert.equal(await platform.balance(user), 50);
  });

  it('holds MCP converse to the same rule', async () => {
    const user = await askingUser(50);
    const client = await mcpClient(platform.conductor.url, user.headers);
    try {
      const converse = async (args: Record<string, unknown>) => (await client.callTool({ name: 'converse', arguments: args })) as ToolReply;
      const paused = (await converse({ content: SIMULATE })).structuredContent;
      assert.equal(paused.status, 'paused');
      const conversation_id = paused.conversation_id;
      const unnamed = await converse({ content: 'yes', conversation_id });
      assert.equal(unnamed.isError, true);
      assert.match(unnamed.structuredContent.suggestion, /pending_id/);
      const unknown = await converse({ content: 'yes', decision: 'confirm', conversation_id, pending_id: UNKNOWN });
      assert.equal(unknown.isError, true);
      assert.match(unknown.structuredContent.error, /no paused call/);
      assert.equal(started(user), 0);

      const confirmed = await converse({ content: 'yes', decision: 'confirm', conversation_id, pending_id: paused.pending.id });
      assert.equal(confirmed.isError, undefined);
      assert.equal(confirmed.structuredContent.status, 'completed');
      const again = await converse({ content: 'yes', decision: 'confirm', conversation_id, pending_id: paused.pending.id });
      assert.equal(again.isError, true);
      assert.match(again.structuredContent.error, /not waiting for a decision/);
      assert.equal(started(user), 1);
      assert.equal(await platform.balance(user), 42);
    } finally {
      await client.close();
    }
  });

  it('documents pending_id in the OpenAPI document', async () => {
    const openapi = (await platform.call('conductor', 'GET', '/openapi.json')).body;
    const text = JSON.stringify(openapi);
    assert.match(text, /"pending_id":\{[^}]*"format":"uuid"/);
    assert.match(text, /the paused call this decision answers/);
  });
});
