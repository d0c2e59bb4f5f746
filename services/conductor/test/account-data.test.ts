import assert from 'node:assert/strict';
import { AccountDeletionSchema, AccountExportPageSchema, encodeExportCursor } from '@tempora/kit/http';
import pg from 'pg';
import { CONDUCTOR_KEY, type Platform, startPlatform, type User } from './harness.ts';
import { type SimulationStandIn, startSimulationStandIn } from './simulation-stand-in.ts';

const SIMULATE = 'Simulate what would have happened had the Continental System failed in 1807';
const service = { 'X-Service-Key': CONDUCTOR_KEY };

/** The account-data contract (services/kit/src/http/account-data.ts): what the gateway deletes and exports of a user here. */
describe('conductor account data', function () {
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

  const path = (userId: string) => `/api/v1/users/${encodeURIComponent(userId)}/data`;
  const exportCall = (userId: string, query = '', headers: Record<string, string> = service) =>
    platform.call('conductor', 'GET', `${path(userId)}${query}`, { headers });
  const deleteCall = (userId: string, headers: Record<string, string> = service) => platform.call('conductor', 'DELETE', path(userId), { headers });

  /** Every page of a user's export, `limit` items a page, as the gateway reads them. */
  async function exportAll(userId: string, limit: number) {
    const pages: Array<{ kind: string; items: Array<Record<string, any>> }> = [];
    let cursor: string | null | undefined;
    do {
      const reply = await exportCall(userId, `?limit=${limit}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
      assert.equal(reply.status, 200, JSON.stringify(reply.body));
      const page = AccountExportPageSchema.parse(reply.body);
      assert.equal(page.service, 'conductor');
      assert.ok(page.items.length <= limit);
      pages.push(page);
      cursor = page.next_cursor;
      assert.ok(pages.length < 100, 'the export ends');
    } while (cursor);
    return pages;
  }

  /** A user with settings, two conversations (one paused before its paid call, with a pause) and their calls. */
  async function userWithData(): Promise<{ user: User; conversations: string[] }> {
    const user = await platform.user(50);
    assert.equal(
      (await platform.call('conductor', 'PATCH', '/api/v1/conductor/settings', { headers: user.headers, body: { verbosity: 'brief' } })).status,
      200,
    );
    const done = await platform.send(user, { content: SIMULATE });
    assert.equal(done.status, 200, JSON.stringify(done.body));
    assert.equal(
      (await platform.call('conductor', 'PATCH', '/api/v1/conductor/settings', { headers: user.headers, body: { autonomy: 'ask_before_paid' } })).status,
      200,
    );
    const paused = await platform.send(user, { content: SIMULATE });
    assert.equal(paused.body.status, 'paused');
    return { user, conversations: [done.body.conversation_id, paused.body.conversation_id] };
  }

  it('exports settings, conversations and messages with their tool calls, page by page, leaving nothing out', async () => {
    const { user, conversations } = await userWithData();
    const other = await userWithData();
    for (const limit of [1, 500]) {
      const pages = await exportAll(user.id, limit);
      const kinds = [...new Set(pages.map((page) => page.kind))];
      assert.deepEqual(kinds, ['settings', 'conversations', 'messages'], 'kinds in their fixed order');
      const items = (kind: string) => pages.filter((page) => page.kind === kind).flatMap((page) => page.items);
      assert.deepEqual(
        items('settings').map(({ updated_at: _, ...settings }) => settings),
        [{ autonomy: 'ask_before_paid', verbosity: 'brief', spend_ceiling: 15, default_render: 'text' }],
      );
      assert.deepEqual(
        items('conversations')
          .map((item) => item.id)
          .sort(),
        [...conversations].sort(),
      );
      const messages = items('messages');
      assert.equal(messages.length, 2);
      assert.deepEqual(messages.map((message) => message.conversation_id).sort(), [...conversations].sort());
      for (const message of messages) assert.equal(message.content, SIMULATE);
      const completed = messages.find((message) => message.status === 'completed')!;
      const calls = completed.tool_calls as Array<Record<string, any>>;
      assert.deepEqual(
        calls.map((call) => call.tool),
        ['start_simulation', 'follow_simulation'],
      );
      assert.equal(calls[0]!.credits, 8);
      assert.equal(calls[0]!.operation, 'simulation.fidelity-3');
      assert.equal(calls[0]!.arguments.mode, 'BRANCHING');
      assert.equal(messages.find((message) => message.status === 'paused')!.tool_calls.length, 0);
      // Nothing of another account's.
      const ids = JSON.stringify(pages);
      for (const id of other.conversations) assert.ok(!ids.includes(id));
    }
  });

  it('pages conversations and messages oldest first, to the microsecond, then by id; a cursor of the old form (an id alone) is 400', async () => {
    const { user, conversations } = await userWithData();
    // T1 and T2 are one microsecond apart, within one millisecond; several rows share T2.
    const [T0, T1, T2, T3] = ['2026-03-01T09:00:00.000000Z', '2026-03-01T10:00:00.000499Z', '2026-03-01T10:00:00.000500Z', '2026-03-01T10:00:01.000000Z'];
    const id = (head: string, tail: string) => `${head}-0000-4000-8000-${tail.padStart(12, '0')}`;
    // Ids in an order other than their times': the smallest is the newest, the largest the oldest.
    const added = { first: id('ffffffff', 'c0'), second: id('7fffffff', 'c1'), shared: id('80000000', 'c2'), last: id('00000000', 'c3') };
    const messages = { second: id('80000000', 'e1'), shared: id('ffffffff', 'e2'), last: id('00000000', 'e3') };
    const db = new pg.Client({ connectionString: platform.conductor.databaseUrl });
    await db.connect();
    let sent: string[];
    try {
      await db.query('update conductor_conversations set created_at = $2 where user_id = $1', [user.id, T2]);
      await db.query('update conductor_messages set created_at = $2 where user_id = $1', [user.id, T2]);
      sent = (await db.query('select id from conductor_messages where user_id = $1', [user.id])).rows.map((row) => row.id);
      for (const [key, at] of [
        ['first', T0],
        ['second', T1],
        ['shared', T2],
        ['last', T3],
      ] as const)
        await db.query('insert into conductor_conversations (id, user_id, title, created_at) values ($1, $2, $3, $4)', [added[key], user.id, key, at]);
      for (const [key, at] of [
        ['second', T1],
        ['shared', T2],
        ['last', T3],
      ] as const)
        await db.query(
          `insert into conductor_messages (id, conversation_id, user_id, content, status, created_at) values ($1, $2, $3, 'added', 'completed', $4)`,
          [messages[key], added.first, user.id, at],
        );
    } finally {
      await db.end();
    }

    const pages = await exportAll(user.id, 2);
    const items = (kind: string) => pages.filter((page) => page.kind === kind).flatMap((page) => page.items);
    assert.equal(items('settings').length, 1);
    assert.deepEqual(
      items('conversations').map((item) => item.id),
      [added.first, added.second, ...[...conversations, added.shared].sort(), added.last],
    );
    const exported = items('messages');
    assert.deepEqual(
      exported.map((item) => item.id),
      [messages.second, ...[...sent, messages.shared].sort(), messages.last],
    );
    assert.deepEqual(
      exported.map((item) => item.created_at),
      [T1, T2, T2, T2, T3].map((at) => new Date(at).toISOString()),
    );
    // Each message keeps its tool calls, and no item carries the position it was paged by.
    assert.deepEqual(
      exported.find((item) => item.status === 'completed' && item.content === SIMULATE)!.tool_calls.map((call: Record<string, any>) => call.tool),
      ['start_simulation', 'follow_simulation'],
    );
    for (const item of pages.flatMap((page) => page.items)) assert.ok(!('position_at' in item));

    for (const cursor of [encodeExportCursor({ kind: 1, after: conversations[0]! }), encodeExportCursor({ kind: 2, after: sent[0]! })]) {
      const reply = await exportCall(user.id, `?cursor=${encodeURIComponent(cursor)}`);
      assert.equal(reply.status, 400, cursor);
    }
  });

  it('refuses a cursor it did not issue (400), a bad limit (422), users and a user named by X-User-ID (403), and no key (401)', async () => {
    const user = await platform.user(10);
    for (const cursor of [
      'not-a-cursor',
      encodeExportCursor({ kind: 1, after: 'nope' }),
      encodeExportCursor({ kind: 0, after: 'x' }),
      encodeExportCursor({ kind: 9, after: '' }),
    ]) {
      const reply = await exportCall(user.id, `?cursor=${encodeURIComponent(cursor)}`);
      assert.equal(reply.status, 400, cursor);
      assert.equal(reply.headers.get('content-type'), 'application/problem+json');
    }
    for (const limit of ['0', '501', 'many']) assert.equal((await exportCall(user.id, `?limit=${limit}`)).status, 422, limit);
    assert.equal((await exportCall(user.id, '', user.headers)).status, 403);
    assert.equal((await deleteCall(user.id, user.headers)).status, 403);
    assert.equal((await exportCall(user.id, '', { ...service, 'X-User-ID': user.id })).status, 403);
    assert.equal((await deleteCall(user.id, { ...service, 'X-User-ID': user.id })).status, 403);
    assert.equal((await exportCall(user.id, '', {})).status, 401);
    assert.equal((await deleteCall(user.id, { 'X-Service-Key': 'wrong-key-0123456789' })).status, 401);
  });

  it('deletes everything of the user, says what, drops pending refunds, keeps other accounts, and answers zero counts the second time', async () => {
    const { user, conversations } = await userWithData();
    const other = await userWithData();
    // A refund the gateway has not booked yet: dropped with the account, whose ledger goes too.
    const db = new pg.Client({ connectionString: platform.conductor.databaseUrl });
    await db.connect();
    try {
      const marked = await db.query(`update conductor_tool_calls set refund_pending = true where user_id = $1 and tool = 'start_simulation'`, [user.id]);
      assert.equal(marked.rowCount, 1);

      const first = await deleteCall(user.id);
      assert.equal(first.status, 200, JSON.stringify(first.body));
      const deletion = AccountDeletionSchema.parse(first.body);
      assert.deepEqual(deletion, {
        service: 'conductor',
        deleted: { settings: 1, conversations: 2, messages: 2, pauses: 1, tool_calls: 2, pending_refunds: 1 },
        kept: {},
        notes: [],
      });
      for (const table of ['conductor_settings', 'conductor_conversations', 'conductor_messages', 'conductor_tool_calls']) {
        const left = await db.query(`select count(*)::int as n from ${table} where user_id = $1`, [user.id]);
        assert.equal(left.rows[0].n, 0, table);
      }
      const pauses = await db.query('select count(*)::int as n from conductor_pauses where conversation_id = any($1::uuid[])', [conversations]);
      assert.equal(pauses.rows[0].n, 0);
    } finally {
      await db.end();
    }
    assert.deepEqual((await platform.call('conductor', 'GET', '/api/v1/conductor/conversations', { headers: user.headers })).body.items, []);
    assert.equal((await platform.call('conductor', 'GET', `/api/v1/conductor/conversations/${conversations[0]}`, { headers: user.headers })).status, 404);
    assert.deepEqual(
      (await exportAll(user.id, 10)).flatMap((page) => page.items),
      [],
    );
    // After the deletion the settler has nothing of the user's left to refund.
    assert.equal(await platform.conductor.instance.service.settleUnsettled('after-deletion'), 0);

    const again = await deleteCall(user.id);
    assert.equal(again.status, 200);
    assert.deepEqual(again.body.deleted, { settings: 0, conversations: 0, messages: 0, pauses: 0, tool_calls: 0, pending_refunds: 0 });

    const kept = (await exportAll(other.user.id, 500)).flatMap((page) => page.items);
    assert.equal(kept.length, 5, 'the other account keeps its settings, conversations and messages');
  });

  it('holds nothing for an id that is not a user of the platform', async () => {
    const reply = await deleteCall('not-a-uuid');
    assert.equal(reply.status, 200);
    assert.ok(Object.values(reply.body.deleted).every((count) => count === 0));
    assert.deepEqual(
      (await exportAll('not-a-uuid', 10)).flatMap((page) => page.items),
      [],
    );
  });
});
