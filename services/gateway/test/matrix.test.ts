import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { ADMIN_KEY, admin, bearer, type GatewayHarness, SERVICE_KEY, useGateway } from './harness.ts';

/** Every kind of credential a request can carry. */
const CREDENTIALS = ['none', 'invalid', 'jwt', 'apiKey', 'readKey', 'serviceKey', 'serviceToken', 'adminKey'] as const;
type Credential = (typeof CREDENTIALS)[number];

interface Case {
  method: string;
  path: string | ((ctx: { userId: string }) => string);
  title?: string;
  body?: (ctx: { userId: string }) => unknown;
  /** Expected status per credential; one number or a list of acceptable ones. */
  expect: Record<Credential, number | number[]>;
}

const row = (
  none: number,
  invalid: number,
  jwt: number,
  apiKey: number,
  readKey: number,
  serviceKey: number,
  serviceToken: number,
  adminKey: number | number[],
) => ({
  none,
  invalid,
  jwt,
  apiKey,
  readKey,
  serviceKey,
  serviceToken,
  adminKey,
});

const CASES: Case[] = [
  { method: 'GET', path: '/health', expect: row(200, 200, 200, 200, 200, 200, 200, 200) },
  { method: 'GET', path: '/metrics', expect: row(404, 401, 404, 404, 404, 404, 404, 404) },
  { method: 'GET', path: '/.well-known/jwks.json', expect: row(200, 401, 200, 200, 200, 200, 200, 200) },
  { method: 'POST', path: '/api/v1/auth/apple', body: () => ({}), expect: row(422, 401, 422, 422, 403, 422, 422, 422) },
  { method: 'POST', path: '/api/v1/auth/google', body: () => ({}), expect: row(422, 401, 422, 422, 403, 422, 422, 422) },
  { method: 'POST', path: '/api/v1/auth/github', body: () => ({}), expect: row(422, 401, 422, 422, 403, 422, 422, 422) },
  { method: 'POST', path: '/api/v1/auth/demo', expect: row(201, 401, 201, 201, 403, 201, 201, 201) },
  { method: 'POST', path: '/api/v1/auth/refresh', body: () => ({ refresh_token: 'tmr_unknown' }), expect: row(401, 401, 401, 401, 403, 401, 401, 401) },
  { method: 'POST', path: '/api/v1/auth/logout', body: () => ({}), expect: row(401, 401, 204, 403, 403, 403, 403, 403) },
  { method: 'GET', path: '/api/v1/auth/me', expect: row(401, 401, 200, 200, 200, 403, 403, 403) },
  { method: 'DELETE', path: '/api/v1/auth/me', expect: row(401, 401, 200, 403, 403, 403, 403, 403) },
  { method: 'POST', path: '/api/v1/auth/dev/token', body: () => ({ external_id: `m-${randomUUID()}` }), expect: row(401, 401, 403, 403, 403, 403, 403, 201) },
  { method: 'POST', path: '/api/v1/auth/service-token', body: () => ({ service: 'matrix' }), expect: row(401, 401, 403, 403, 403, 403, 403, 201) },
  { method: 'POST', path: '/api/v1/users/resolve', body: () => ({ external_id: `r-${randomUUID()}` }), expect: row(401, 401, 403, 403, 403, 201, 201, 403) },
  {
    method: 'PUT',
    title: '/api/v1/users/{user_id}/tier',
    path: ({ userId }) => `/api/v1/users/${userId}/tier`,
    body: () => ({ tier: 'pro' }),
    expect: row(401, 401, 403, 403, 403, 200, 200, 200),
  },
  { method: 'GET', path: '/api/v1/users/me/timepoints', expect: row(401, 401, 200, 200, 200, 403, 403, 403) },
  { method: 'GET', path: '/api/v1/users/me/export', expect: row(401, 401, 200, 403, 403, 403, 403, 403) },
  { method: 'POST', path: '/api/v1/users/me/api-keys', body: () => ({ name: 'm' }), expect: row(401, 401, 201, 403, 403, 403, 403, 403) },
  { method: 'GET', path: '/api/v1/users/me/api-keys', expect: row(401, 401, 200, 200, 200, 403, 403, 403) },
  { method: 'DELETE', path: `/api/v1/users/me/api-keys/${randomUUID()}`, expect: row(401, 401, 404, 403, 403, 403, 403, 403) },
  { method: 'GET', path: '/api/v1/credits/balance', expect: row(401, 401, 200, 200, 200, 403, 403, 403) },
  { method: 'GET', path: '/api/v1/credits/history', expect: row(401, 401, 200, 200, 200, 403, 403, 403) },
  { method: 'GET', path: '/api/v1/credits/costs', expect: row(200, 401, 200, 200, 200, 200, 200, 200) },
  {
    method: 'POST',
    path: '/api/v1/credits/admin/grant',
    body: ({ userId }) => ({ user_id: userId, amount: 1, reason: 'm', idempotency_key: randomUUID() }),
    expect: row(401, 401, 403, 403, 403, 403, 403, 201),
  },
  {
    method: 'POST',
    path: '/api/v1/credits/charge',
    body: ({ userId }) => ({ user_id: userId, amount: 1, operation: 'm', idempotency_key: randomUUID() }),
    expect: row(401, 401, 403, 403, 403, 201, 201, 403),
  },
  {
    method: 'POST',
    path: '/api/v1/credits/refund',
    body: ({ userId }) => ({ user_id: userId, idempotency_key: 'none' }),
    expect: row(401, 401, 403, 403, 403, 404, 404, 403),
  },
  { method: 'GET', path: '/api/v1/timepoints/abc', expect: row(401, 401, 200, 200, 200, 403, 403, 403) },
  { method: 'POST', path: '/api/v1/timepoints/generate/sync', body: () => ({ query: 'matrix' }), expect: row(401, 401, 200, 200, 403, 403, 403, 403) },
  { method: 'GET', path: '/api/v1/graph/moments', expect: row(200, 401, 200, 200, 200, 403, 403, 403) },
  { method: 'GET', path: '/api/v1/billing/packs', expect: row(401, 401, 200, 200, 200, 403, 403, 403) },
  { method: 'GET', path: '/api/v1/nowhere-native/../auth/unknown', expect: row(404, 401, 404, 404, 404, 404, 404, 404) },
];

describe('gateway: authorization matrix (every route × every kind of credential)', function () {
  this.timeout(60_000);
  let gw: GatewayHarness;
  let serviceToken: string;
  useGateway(async (started) => {
    gw = started;
    serviceToken = (await gw.call('POST', '/api/v1/auth/service-token', { headers: admin, body: { service: 'matrix' } })).body.access_token;
  });

  /** A fresh user and fresh credentials for each cell, so destructive cells (logout, delete) stand alone. */
  async function credential(kind: Credential): Promise<{ headers: Record<string, string>; userId: string }> {
    const user = await gw.user();
    const key = async (scopes: string[]) =>
      (await gw.call('POST', '/api/v1/users/me/api-keys', { headers: user.headers, body: { name: kind, scopes } })).body.key as string;
    switch (kind) {
      case 'none':
        return { headers: {}, userId: user.userId };
      case 'invalid':
        return { headers: bearer('eyJhbGciOiJFUzI1NiJ9.e30.invalid'), userId: user.userId };
      case 'jwt':
        return { headers: user.headers, userId: user.userId };
      case 'apiKey':
        return { headers: { 'X-API-Key': await key(['read', 'write']) }, userId: user.userId };
      case 'readKey':
        return { headers: { 'X-API-Key': await key(['read']) }, userId: user.userId };
      case 'serviceKey':
        return { headers: { 'X-Service-Key': SERVICE_KEY }, userId: user.userId };
      case 'serviceToken':
        return { headers: bearer(serviceToken), userId: user.userId };
      case 'adminKey':
        return { headers: { 'X-Admin-Key': ADMIN_KEY }, userId: user.userId };
    }
  }

  for (const testCase of CASES) {
    it(`${testCase.method} ${testCase.title ?? String(testCase.path)}`, async () => {
      const failures: string[] = [];
      for (const kind of CREDENTIALS) {
        const { headers, userId } = await credential(kind);
        const path = typeof testCase.path === 'function' ? testCase.path({ userId }) : testCase.path;
        const body = testCase.body?.({ userId });
        const reply = await gw.call(testCase.method, path, { headers, ...(body !== undefined ? { body } : {}) });
        const expected = testCase.expect[kind];
        const acceptable = Array.isArray(expected) ? expected : [expected];
        if (!acceptable.includes(reply.status))
          failures.push(`${kind}: expected ${acceptable.join('|')}, got ${reply.status} ${typeof reply.body === 'object' ? (reply.body.detail ?? '') : ''}`);
        if (reply.status === 401) assert.ok(reply.headers.get('www-authenticate'), `${kind}: 401 without WWW-Authenticate`);
      }
      assert.deepEqual(failures, []);
    });
  }
});
