import assert from 'node:assert/strict';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type Koa from 'koa';
import { request } from '../../../test/support/http.ts';
import {
  ACCOUNT_DATA_PATH,
  type AccountExportPage,
  AccountExportPageSchema,
  defineAccountDataRoutes,
  type ExportReader,
  encodeExportCursor,
  exportPage,
  InvalidExportPosition,
  keysetPage,
} from '../src/http/account-data.ts';
import { createApp } from '../src/http/app.ts';
import { serviceKeyAuth } from '../src/http/auth.ts';
import { Problem } from '../src/http/errors.ts';
import type { RouteDefinition } from '../src/http/routes.ts';
import { createLogger } from '../src/observability/logger.ts';
import { Metrics } from '../src/observability/metrics.ts';

const KEY = 'account-data-key-0123456789';
const service = { 'X-Service-Key': KEY };
const GATEWAY_ONLY = /the gateway's own calls/;
const NOT_OURS = 'cursor: not a next_cursor this service issued; start without one';

/** A service app around `routes`, identified by `identify` when given (as the kit's gatewayCaller does), else by the service key. */
async function listen(name: string, routes: RouteDefinition[], identify?: Koa.Middleware): Promise<{ url: string; openapi: any; close(): Promise<void> }> {
  const { app, openapi } = createApp({
    name: 'graph',
    version: '0.0.0',
    title: name,
    description: name,
    config: { TEMPORA_DOMAIN: undefined, BODY_LIMIT: '1kb', TRUSTED_PROXIES: [], TRUSTED_PROXY_HOPS: 0 },
    logger: createLogger(name, 'silent'),
    metrics: new Metrics(`account_data_${name}`),
    authenticators: [serviceKeyAuth([KEY])],
    ...(identify ? { identify } : {}),
    health: async () => ({ status: 'ok' }),
    routes,
  });
  const server: Server = app.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    openapi,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

const describeBoth = { deletion: { summary: 'delete', description: 'delete' }, export: { summary: 'export', description: 'export' } };

describe('kit account data: the contract routes every service composes', () => {
  // A user's data in three kinds: letters by letter, one settings item, numbers by number.
  const letters = ['a', 'b', 'c', 'd', 'e'];
  const numbers = ['1', '2', '3'];
  const calls = { erase: [] as string[], reads: 0 };
  const readers = (userId: string): ExportReader[] => {
    const after = (all: string[], position: string, limit: number) => all.filter((value) => value > position).slice(0, limit);
    return [
      {
        kind: 'letters',
        after: /^[a-z]$/,
        read: async (position, limit) => {
          calls.reads += 1;
          return keysetPage(
            after(letters, position, limit + 1),
            limit,
            (value) => value,
            (value) => ({ letter: value, user: userId }),
          );
        },
      },
      { kind: 'settings', read: async () => ({ items: [{ theme: 'dark' }] }) },
      {
        kind: 'numbers',
        after: /^\d+$/,
        read: async (position, limit) =>
          keysetPage(
            after(numbers, position, limit + 1),
            limit,
            (value) => value,
            (value) => ({ number: Number(value) }),
          ),
      },
    ];
  };
  let app: Awaited<ReturnType<typeof listen>>;
  const data = (query = '') => `${ACCOUNT_DATA_PATH('user-1')}${query}`;

  before(async () => {
    app = await listen(
      'readers',
      defineAccountDataRoutes({
        service: 'tester',
        erase: async (userId) => {
          calls.erase.push(userId);
          if (userId === 'unreachable') throw new Problem(503, 'the provider could not be reached');
          return { deleted: { letters: letters.length } };
        },
        readers,
        describe: describeBoth,
        extraResponses: { deletion: { 503: { description: 'the provider could not be reached' } } },
      }),
    );
  });
  after(() => app.close());
  beforeEach(() => {
    calls.erase.length = 0;
    calls.reads = 0;
  });

  it('answers the service key alone; refuses no key (401) and a user named beside it (403), touching nothing', async () => {
    for (const method of ['DELETE', 'GET']) {
      assert.equal((await request(app.url, data(), { method })).status, 401, method);
      assert.equal((await request(app.url, data(), { method, headers: { 'X-Service-Key': 'not-the-key-0123456789' } })).status, 401, method);
      const asUser = await request(app.url, data(), { method, headers: { ...service, 'X-User-ID': 'user-1' } });
      assert.equal(asUser.status, 403, method);
      assert.match(asUser.headers.get('content-type') ?? '', /application\/problem\+json/);
      assert.match(asUser.body.detail, GATEWAY_ONLY);
    }
    assert.deepEqual(calls, { erase: [], reads: 0 }, 'a refused call reaches neither the deletion nor the export');
  });

  it('answers a deletion with the service name, and no kept data or notes unless the service says', async () => {
    const reply = await request(app.url, data(), { method: 'DELETE', headers: service });
    assert.equal(reply.status, 200);
    assert.deepEqual(reply.body, { service: 'tester', deleted: { letters: 5 }, kept: {}, notes: [] });
    assert.deepEqual(calls.erase, ['user-1']);
    const failed = await request(app.url, ACCOUNT_DATA_PATH('unreachable'), { method: 'DELETE', headers: service });
    assert.equal(failed.status, 503, "the service's own problem passes through");
  });

  it('pages across the kinds in order, each item once, a kind never ending on an empty page', async () => {
    const pageAt = async (cursor: string | null | undefined): Promise<AccountExportPage> => {
      const reply = await request(app.url, data(`?limit=2${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`), { headers: service });
      assert.equal(reply.status, 200, JSON.stringify(reply.body));
      return AccountExportPageSchema.parse(reply.body);
    };
    const pages = [await pageAt(undefined)];
    // Bounded, so an export that never ends fails the comparison below rather than hanging.
    while (pages.at(-1)!.next_cursor && pages.length < 20) pages.push(await pageAt(pages.at(-1)!.next_cursor));
    assert.deepEqual(
      pages.map((page) => [page.service, page.kind, page.items]),
      [
        [
          'tester',
          'letters',
          [
            { letter: 'a', user: 'user-1' },
            { letter: 'b', user: 'user-1' },
          ],
        ],
        [
          'tester',
          'letters',
          [
            { letter: 'c', user: 'user-1' },
            { letter: 'd', user: 'user-1' },
          ],
        ],
        ['tester', 'letters', [{ letter: 'e', user: 'user-1' }]],
        ['tester', 'settings', [{ theme: 'dark' }]],
        ['tester', 'numbers', [{ number: 1 }, { number: 2 }]],
        ['tester', 'numbers', [{ number: 3 }]],
      ],
    );
    // Exactly `limit` rows left: the kind ends with that page.
    const whole = await request(app.url, data('?limit=5'), { headers: service });
    assert.equal(whole.body.items.length, 5);
    assert.deepEqual(JSON.parse(Buffer.from(whole.body.next_cursor, 'base64url').toString()), { kind: 1, after: '' });
  });

  it('answers 400, one wording, to a cursor it did not issue, before any read', async () => {
    const foreign = [
      'not-a-cursor',
      Buffer.from('[1]').toString('base64url'),
      Buffer.from('{"kind":"letters"}').toString('base64url'),
      encodeExportCursor({ kind: 3, after: '' }), // past the last kind
      encodeExportCursor({ kind: 0, after: 'AB' }), // not a position letters hands out
      encodeExportCursor({ kind: 1, after: 'x' }), // settings hands out none
      encodeExportCursor({ kind: 2, after: '1; drop table numbers' }),
    ];
    for (const cursor of foreign) {
      const reply = await request(app.url, data(`?cursor=${encodeURIComponent(cursor)}`), { headers: service });
      assert.equal(reply.status, 400, cursor);
      assert.match(reply.headers.get('content-type') ?? '', /application\/problem\+json/);
      assert.equal(reply.body.detail, NOT_OURS);
    }
    assert.equal(calls.reads, 0);
    for (const limit of ['0', '501', 'many']) assert.equal((await request(app.url, data(`?limit=${limit}`), { headers: service })).status, 422, limit);
  });

  it('documents both operations with the contract schemas, the service key and the extra answers', () => {
    const path = app.openapi.paths['/api/v1/users/{user_id}/data'];
    assert.equal(path.delete.operationId, 'deleteUserData');
    assert.equal(path.get.operationId, 'exportUserData');
    for (const operation of [path.delete, path.get]) {
      assert.deepEqual(operation.security, [{ ServiceKey: [] }]);
      assert.ok(operation.responses['401'] && operation.responses['403']);
    }
    assert.equal(path.delete.responses['200'].content['application/json'].schema.$ref, '#/components/schemas/AccountDeletion');
    assert.equal(path.get.responses['200'].content['application/json'].schema.$ref, '#/components/schemas/AccountExportPage');
    assert.ok(path.get.responses['400']);
    assert.ok(path.delete.responses['503']);
    assert.equal(path.get.responses['503'], undefined);
  });
});

describe('kit account data: a service that pages itself, behind the caller middleware', () => {
  let app: Awaited<ReturnType<typeof listen>>;
  // What the kit's gatewayCaller decides, as the test says: `via` from X-Test-Via, else by X-User-ID.
  const identify: Koa.Middleware = async (ctx, next) => {
    const principals = new Map();
    if (ctx.get('X-Service-Key') === KEY) {
      principals.set('ServiceKey', { kind: 'service', id: 'service:test' });
      ctx.state.caller = { via: (ctx.get('X-Test-Via') || (ctx.get('X-User-ID') ? 'gateway' : 'service')) as 'service', principal: 'service:test' };
    }
    ctx.state.principals = principals;
    await next();
  };

  before(async () => {
    app = await listen(
      'pages',
      defineAccountDataRoutes({
        service: 'pager',
        erase: async () => ({ deleted: { rows: 0 }, kept: { payments: { count: 2, reason: 'the law' } }, notes: ['cancel with Apple'] }),
        exportPage: async (_userId, position, limit) => {
          if (position.after === 'refused') throw new InvalidExportPosition();
          return exportPage('pager', [{ kind: 'rows', after: /^(refused|\d+)$/, read: async () => ({ items: [{ limit }] }) }], position, limit);
        },
        describe: describeBoth,
      }),
      identify,
    );
  });
  after(() => app.close());

  it('admits only a service acting as itself, as its caller says', async () => {
    assert.equal((await request(app.url, ACCOUNT_DATA_PATH('u'), { headers: service })).status, 200);
    for (const via of ['gateway', 'token']) {
      const reply = await request(app.url, ACCOUNT_DATA_PATH('u'), { method: 'DELETE', headers: { ...service, 'X-Test-Via': via } });
      assert.equal(reply.status, 403, via);
      assert.match(reply.body.detail, GATEWAY_ONLY);
    }
  });

  it("keeps the service's kept data and notes, and its own paging: past the last kind is its choice, a refused position is 400", async () => {
    const deleted = await request(app.url, ACCOUNT_DATA_PATH('u'), { method: 'DELETE', headers: service });
    assert.deepEqual(deleted.body, {
      service: 'pager',
      deleted: { rows: 0 },
      kept: { payments: { count: 2, reason: 'the law' } },
      notes: ['cancel with Apple'],
    });
    const past = await request(app.url, `${ACCOUNT_DATA_PATH('u')}?cursor=${encodeExportCursor({ kind: 5, after: '' })}`, { headers: service });
    assert.deepEqual([past.status, past.body.kind, past.body.next_cursor], [200, 'end', null]);
    for (const after of ['refused', 'x']) {
      const reply = await request(app.url, `${ACCOUNT_DATA_PATH('u')}?cursor=${encodeExportCursor({ kind: 0, after })}`, { headers: service });
      assert.equal(reply.status, 400, after);
      assert.equal(reply.body.detail, NOT_OURS);
    }
    assert.equal((await request(app.url, `${ACCOUNT_DATA_PATH('u')}?cursor=%2A%2A`, { headers: service })).status, 400);
  });
});

describe('kit keysetPage', () => {
  it('keeps `limit` rows and names the last kept only when a further row was read', () => {
    const rows = [{ id: 'a' }, { id: 'b' }, { id: 'c' }];
    assert.deepEqual(
      keysetPage(rows, 3, (row) => row.id),
      { items: rows },
    );
    assert.deepEqual(
      keysetPage(rows, 2, (row) => row.id),
      { items: rows.slice(0, 2), next: 'b' },
    );
    assert.deepEqual(
      keysetPage(
        rows,
        2,
        (row) => row.id,
        (row) => ({ key: row.id.toUpperCase() }),
      ),
      { items: [{ key: 'A' }, { key: 'B' }], next: 'b' },
    );
    assert.deepEqual(keysetPage([], 2, String), { items: [] });
  });
});
