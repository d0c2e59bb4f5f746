import assert from 'node:assert/strict';
import { createHash, createHmac, createPublicKey, randomUUID } from 'node:crypto';
import { generateKeyPair, SignJWT } from 'jose';
import { scrape } from '../../kit/test/metrics-support.ts';
import { admin, bearer, type GatewayHarness, SERVICE_KEY, service, startGateway, UPSTREAM_KEY, useGateway } from './harness.ts';

const b64 = (value: object) => Buffer.from(JSON.stringify(value)).toString('base64url');

describe('gateway: sign-in and tokens', function () {
  this.timeout(30_000);
  let gw: GatewayHarness;
  useGateway((started) => {
    gw = started;
  });

  describe('Sign in with Apple', () => {
    it('creates the account with its signup grant (201), then signs the same account in (200)', async () => {
      const token = await gw.apple.sign({ sub: 'apple-001', email: 'ada@example.com', email_verified: 'true' });
      const first = await gw.call('POST', '/api/v1/auth/apple', { body: { identity_token: token, name: 'Ada' } });
      assert.equal(first.status, 201, JSON.stringify(first.body));
      assert.equal(first.body.new_user, true);
      assert.equal(first.body.token_type, 'Bearer');
      assert.equal(first.body.expires_in, 900);
      assert.match(first.body.refresh_token, /^tmr_/);
      assert.equal(first.body.user.email, 'ada@example.com');
      assert.equal(first.body.user.name, 'Ada');
      assert.equal(first.body.user.balance, 50);
      assert.deepEqual(first.body.user.providers, ['apple']);
      const again = await gw.call('POST', '/api/v1/auth/apple', { body: { identity_token: await gw.apple.sign({ sub: 'apple-001' }) } });
      assert.equal(again.status, 200);
      assert.equal(again.body.user.id, first.body.user.id);
      assert.equal(again.body.user.balance, 50, 'the signup grant is given once');
    });

    it('issues ES256 access tokens with sub, iat, exp (15 minutes), jti and tier', async () => {
      const reply = await gw.call('POST', '/api/v1/auth/apple', { body: { identity_token: await gw.apple.sign({ sub: 'apple-claims' }) } });
      const [header, payload] = reply.body.access_token
        .split('.')
        .slice(0, 2)
        .map((part: string) => JSON.parse(Buffer.from(part, 'base64url').toString()));
      assert.equal(header.alg, 'ES256');
      assert.ok(header.kid);
      assert.equal(payload.sub, reply.body.user.id);
      assert.equal(payload.exp - payload.iat, 900);
      assert.ok(payload.jti);
      assert.equal(payload.tier, 'free');
    });

    for (const [name, sign, status] of [
      ['a token for another audience', (gw: GatewayHarness) => gw.apple.sign({ sub: 'x' }, { audience: 'com.other.app' }), 401],
      ['a token from another issuer', (gw: GatewayHarness) => gw.apple.sign({ sub: 'x' }, { issuer: 'https://evil.example' }), 401],
      ['an expired token', (gw: GatewayHarness) => gw.apple.sign({ sub: 'x' }, { expiresIn: -120 }), 401],
      ['a token signed by a key Apple does not publish', (gw: GatewayHarness) => gw.apple.sign({ sub: 'x' }, { key: 'rogue' }), 401],
      ['a malformed token', async () => 'not.a.jwt-at-all', 401],
    ] as const) {
      it(`refuses ${name}`, async () => {
        const reply = await gw.call('POST', '/api/v1/auth/apple', { body: { identity_token: await sign(gw) } });
        assert.equal(reply.status, status, JSON.stringify(reply.body));
        assert.equal(reply.headers.get('content-type'), 'application/problem+json');
        assert.match(reply.headers.get('www-authenticate') ?? '', /Bearer/);
      });
    }

    it('checks the nonce when one is given: raw or SHA-256 in the token, refused when different', async () => {
      const raw = 'nonce-value-123';
      const hashed = createHash('sha256').update(raw).digest('hex');
      const ok1 = await gw.call('POST', '/api/v1/auth/apple', {
        body: { identity_token: await gw.apple.sign({ sub: 'apple-nonce', nonce: hashed }), nonce: raw },
      });
      assert.equal(ok1.status, 201);
      const ok2 = await gw.call('POST', '/api/v1/auth/apple', {
        body: { identity_token: await gw.apple.sign({ sub: 'apple-nonce', nonce: raw }), nonce: raw },
      });
      assert.equal(ok2.status, 200);
      const bad = await gw.call('POST', '/api/v1/auth/apple', {
        body: { identity_token: await gw.apple.sign({ sub: 'apple-nonce', nonce: hashed }), nonce: 'other' },
      });
      assert.equal(bad.status, 401);
      assert.match(bad.body.detail, /nonce/);
      const missing = await gw.call('POST', '/api/v1/auth/apple', { body: { identity_token: await gw.apple.sign({ sub: 'apple-nonce' }), nonce: raw } });
      assert.equal(missing.status, 401);
    });

    it('answers 422 without identity_token', async () => {
      const reply = await gw.call('POST', '/api/v1/auth/apple', { body: {} });
      assert.equal(reply.status, 422);
      assert.equal(reply.body.errors[0].path, 'body.identity_token');
    });
  });

  describe('Sign in with Google', () => {
    it('signs in with a valid ID token and keeps the email only when verified', async () => {
      const verified = await gw.call('POST', '/api/v1/auth/google', {
        body: { id_token: await gw.google.sign({ sub: 'g-1', email: 'g@example.com', email_verified: true }) },
      });
      assert.equal(verified.status, 201);
      assert.equal(verified.body.user.email, 'g@example.com');
      const unverified = await gw.call('POST', '/api/v1/auth/google', {
        body: { id_token: await gw.google.sign({ sub: 'g-2', email: 'h@example.com', email_verified: false }) },
      });
      assert.equal(unverified.status, 201);
      assert.equal(unverified.body.user.email, null);
    });
    it("accepts Google's short issuer form and refuses a wrong audience and an Apple token", async () => {
      const short = await gw.call('POST', '/api/v1/auth/google', {
        body: { id_token: await gw.google.sign({ sub: 'g-3' }, { issuer: 'accounts.google.com' }) },
      });
      assert.equal(short.status, 201);
      const audience = await gw.call('POST', '/api/v1/auth/google', { body: { id_token: await gw.google.sign({ sub: 'g-3' }, { audience: 'someone-else' }) } });
      assert.equal(audience.status, 401);
      const apple = await gw.call('POST', '/api/v1/auth/google', { body: { id_token: await gw.apple.sign({ sub: 'g-3' }) } });
      assert.equal(apple.status, 401);
    });
  });

  describe('Sign in with GitHub', () => {
    it('exchanges the code and identifies the user through the user API', async () => {
      const code = gw.github.issueCode({ id: 4242, login: 'octo', name: 'Octo Cat', email: 'octo@example.com' });
      const reply = await gw.call('POST', '/api/v1/auth/github', { body: { code } });
      assert.equal(reply.status, 201, JSON.stringify(reply.body));
      assert.equal(reply.body.user.name, 'Octo Cat');
      assert.deepEqual(reply.body.user.providers, ['github']);
      const again = await gw.call('POST', '/api/v1/auth/github', { body: { code: gw.github.issueCode({ id: 4242, login: 'octo' }) } });
      assert.equal(again.status, 200);
      assert.equal(again.body.user.id, reply.body.user.id);
    });
    it('refuses a code GitHub rejects with HTTP 200 and an error field', async () => {
      const reply = await gw.call('POST', '/api/v1/auth/github', { body: { code: 'used-or-invented' } });
      assert.equal(reply.status, 401);
      assert.match(reply.body.detail, /bad_verification_code/);
    });
    it('refuses when the user API does not accept the token, and answers 502 when GitHub is down', async () => {
      gw.github.userApiStatus = 401;
      const refused = await gw.call('POST', '/api/v1/auth/github', { body: { code: gw.github.issueCode({ id: 1, login: 'a' }) } });
      assert.equal(refused.status, 401);
      gw.github.userApiStatus = 503;
      const down = await gw.call('POST', '/api/v1/auth/github', { body: { code: gw.github.issueCode({ id: 1, login: 'a' }) } });
      assert.equal(down.status, 502);
      gw.github.userApiStatus = 200;
    });
  });

  describe('provider availability', () => {
    it("answers 502 when a provider's keys cannot be fetched and 503 for a provider that is not configured", async () => {
      const harness = await startGateway({ APPLE_JWKS_URL: 'http://127.0.0.1:9/keys', GOOGLE_CLIENT_ID: '', GITHUB_CLIENT_ID: '' });
      try {
        const apple = await harness.call('POST', '/api/v1/auth/apple', { body: { identity_token: await harness.apple.sign({ sub: 'a' }) } });
        assert.equal(apple.status, 502);
        const google = await harness.call('POST', '/api/v1/auth/google', { body: { id_token: await harness.google.sign({ sub: 'g' }) } });
        assert.equal(google.status, 503);
        const github = await harness.call('POST', '/api/v1/auth/github', { body: { code: 'x' } });
        assert.equal(github.status, 503);
      } finally {
        await harness.stop();
      }
    });
  });

  describe('demo sign-in', () => {
    it("explains a token variable that holds a refused sign-in's answer, or nothing", async () => {
      const problem = JSON.stringify({ type: 'https://tempora.dev/problems/demo-sign-in-limit', title: 'Demo sign-in limit reached', status: 429 });
      const json = await gw.call('GET', '/api/v1/auth/me', { headers: { Authorization: `Bearer ${problem}` } });
      assert.equal(json.status, 401);
      assert.match(json.body.detail, /JSON document where the access token belongs/);
      const empty = await gw.call('GET', '/api/v1/auth/me', { headers: { Authorization: 'Bearer ' } });
      assert.equal(empty.status, 401);
      assert.match(empty.body.detail, /no access token after "Bearer"/);
    });
    it('creates a fresh demo account with the demo grant each time', async () => {
      const a = await gw.call('POST', '/api/v1/auth/demo');
      const b = await gw.call('POST', '/api/v1/auth/demo');
      assert.equal(a.status, 201);
      assert.equal(a.body.user.is_demo, true);
      assert.equal(a.body.user.balance, 20);
      assert.notEqual(a.body.user.id, b.body.user.id);
    });
  });

  describe('access-token verification', () => {
    let valid: string;
    let publicPem: string;
    before(async () => {
      valid = (await gw.user()).access;
      const jwks = await gw.call('GET', '/.well-known/jwks.json');
      publicPem = createPublicKey({ key: jwks.body.keys[0], format: 'jwk' }).export({ type: 'spki', format: 'pem' }).toString();
    });
    const me = (token: string) => gw.call('GET', '/api/v1/auth/me', { headers: bearer(token) });
    const claimsOf = (token: string) => JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString());

    it('accepts a valid token', async () => {
      assert.equal((await me(valid)).status, 200);
    });
    it('refuses alg none', async () => {
      const forged = `${b64({ alg: 'none', typ: 'JWT' })}.${b64(claimsOf(valid))}.`;
      const reply = await me(forged);
      assert.equal(reply.status, 401);
      assert.match(reply.headers.get('www-authenticate') ?? '', /invalid_token/);
    });
    it('refuses HS256 signed with the public key as the HMAC secret', async () => {
      const header = JSON.parse(Buffer.from(valid.split('.')[0]!, 'base64url').toString());
      const input = `${b64({ ...header, alg: 'HS256' })}.${b64(claimsOf(valid))}`;
      const forged = `${input}.${createHmac('sha256', publicPem).update(input).digest('base64url')}`;
      assert.equal((await me(forged)).status, 401);
    });
    it('refuses an expired token, a token from another key, a tampered payload and a non-Bearer scheme', async () => {
      const { kid, ...rest } = { kid: JSON.parse(Buffer.from(valid.split('.')[0]!, 'base64url').toString()).kid };
      void rest;
      const other = await generateKeyPair('ES256');
      const claims = claimsOf(valid);
      const now = Math.floor(Date.now() / 1000);
      const expired = await new SignJWT({ ...claims, iat: now - 2000, exp: now - 1000 }).setProtectedHeader({ alg: 'ES256', kid }).sign(other.privateKey);
      assert.equal((await me(expired)).status, 401);
      const wrongKey = await new SignJWT(claims).setProtectedHeader({ alg: 'ES256', kid }).sign(other.privateKey);
      assert.equal((await me(wrongKey)).status, 401);
      const [h, , s] = valid.split('.');
      const tampered = `${h}.${b64({ ...claims, tier: 'enterprise' })}.${s}`;
      assert.equal((await me(tampered)).status, 401);
      assert.equal((await gw.call('GET', '/api/v1/auth/me', { headers: { Authorization: 'Basic abc' } })).status, 401);
    });
    it('refuses an expired token signed by the gateway itself, saying why', async () => {
      const tokens = gw.instance.deps.auth.tokens;
      const issued = await tokens.sign({ tier: 'free' }, claimsOf(valid).sub, -60);
      const reply = await me(issued.token);
      assert.equal(reply.status, 401);
      assert.match(reply.body.detail, /expired/);
    });
  });

  describe('refresh tokens', () => {
    it('rotates: the new pair works and its refresh token rotates in turn', async () => {
      const user = await gw.user();
      const rotated = await gw.call('POST', '/api/v1/auth/refresh', { body: { refresh_token: user.refresh } });
      assert.equal(rotated.status, 200);
      assert.notEqual(rotated.body.refresh_token, user.refresh);
      assert.equal((await gw.call('GET', '/api/v1/auth/me', { headers: bearer(rotated.body.access_token) })).status, 200);
      const next = await gw.call('POST', '/api/v1/auth/refresh', { body: { refresh_token: rotated.body.refresh_token } });
      assert.equal(next.status, 200);
    });
    it('treats reuse of a rotated token as theft: the whole family is revoked', async () => {
      const harness = await startGateway({ REFRESH_REUSE_GRACE_SECONDS: '0' });
      try {
        const user = await harness.user();
        const rotated = await harness.call('POST', '/api/v1/auth/refresh', { body: { refresh_token: user.refresh } });
        assert.equal(rotated.status, 200);
        await new Promise((resolve) => setTimeout(resolve, 20));
        const replay = await harness.call('POST', '/api/v1/auth/refresh', { body: { refresh_token: user.refresh } });
        assert.equal(replay.status, 401);
        assert.match(replay.body.detail, /already used/);
        const descendant = await harness.call('POST', '/api/v1/auth/refresh', { body: { refresh_token: rotated.body.refresh_token } });
        assert.equal(descendant.status, 401, 'the legitimate descendant is revoked too');
        assert.match(descendant.body.detail, /revoked/);
        const metrics = await scrape(harness.server);
        for (const [outcome, count] of [
          ['rotated', 1],
          ['reuse_detected', 1],
          ['refused', 1],
          ['replayed_in_grace', 0],
        ] as const) {
          assert.match(metrics, new RegExp(`^gateway_token_refreshes_total\\{outcome="${outcome}",service="gateway"\\} ${count}$`, 'm'), outcome);
        }
      } finally {
        await harness.stop();
      }
    });
    it('gives concurrent refreshes of one token within the grace window each a working pair', async () => {
      const user = await gw.user();
      const replies = await Promise.all([1, 2, 3].map(() => gw.call('POST', '/api/v1/auth/refresh', { body: { refresh_token: user.refresh } })));
      assert.deepEqual(
        replies.map((r) => r.status),
        [200, 200, 200],
      );
      for (const reply of replies)
        assert.equal((await gw.call('POST', '/api/v1/auth/refresh', { body: { refresh_token: reply.body.refresh_token } })).status, 200);
    });
    it('refuses an expired refresh token', async () => {
      const user = await gw.user();
      await gw.instance
        .knex('refresh_tokens')
        .where({ user_id: user.userId })
        .update({ expires_at: new Date(Date.now() - 1000) });
      const reply = await gw.call('POST', '/api/v1/auth/refresh', { body: { refresh_token: user.refresh } });
      assert.equal(reply.status, 401);
      assert.match(reply.body.detail, /expired/);
      assert.match(reply.headers.get('www-authenticate') ?? '', /invalid_grant/);
    });
    it('refuses unknown refresh tokens and ignores a stale access token sent along', async () => {
      const reply = await gw.call('POST', '/api/v1/auth/refresh', { body: { refresh_token: 'tmr_nope' }, headers: bearer('garbage') });
      assert.equal(reply.status, 401);
      assert.match(reply.body.detail, /not valid/);
    });
  });

  describe('logout', () => {
    it('revokes the session and the access token presented', async () => {
      const user = await gw.user();
      const out = await gw.call('POST', '/api/v1/auth/logout', { headers: user.headers, body: { refresh_token: user.refresh } });
      assert.equal(out.status, 204);
      assert.equal((await gw.call('POST', '/api/v1/auth/refresh', { body: { refresh_token: user.refresh } })).status, 401);
      assert.equal((await gw.call('GET', '/api/v1/auth/me', { headers: user.headers })).status, 401);
    });
    it('without a refresh token ends every session of the account', async () => {
      const first = await gw.user({ externalId: 'multi-session' });
      const second = await gw.user({ externalId: 'multi-session' });
      assert.equal((await gw.call('POST', '/api/v1/auth/logout', { headers: first.headers })).status, 204);
      assert.equal((await gw.call('POST', '/api/v1/auth/refresh', { body: { refresh_token: second.refresh } })).status, 401);
      // At once: a token issued in the second of the sign-out is still good (the cut-off allows for iat's whole seconds).
      const fresh = await gw.user({ externalId: 'multi-session' });
      assert.equal((await gw.call('GET', '/api/v1/auth/me', { headers: fresh.headers })).status, 200, 'a later sign-in works');
    });
  });

  describe('profile and account deletion', () => {
    it('GET /auth/me returns the profile', async () => {
      const user = await gw.user({ tier: 'pro' });
      const reply = await gw.call('GET', '/api/v1/auth/me', { headers: user.headers });
      assert.equal(reply.status, 200);
      assert.equal(reply.body.id, user.userId);
      assert.equal(reply.body.tier, 'pro');
      assert.deepEqual(reply.body.providers, ['dev']);
    });
    it('DELETE /auth/me deletes here and in every service, says what went where, and answers the same again', async () => {
      const services = ['generation', 'graph', 'simulation', 'conductor', 'billing'] as const;
      for (const name of services) gw.upstreams[name].reset();
      gw.upstreams.generation.on('DELETE /api/v1/users/*', (_req, res) => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ service: 'generation', deleted: { timepoints: 3, jobs: 1 }, kept: {}, notes: [] }));
      });
      gw.upstreams.billing.on('DELETE /api/v1/users/*', (_req, res) => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ service: 'billing', deleted: { subscriptions: 1 }, kept: { payments: { count: 2, reason: 'accounting law' } }, notes: [] }));
      });
      const user = await gw.user();
      await gw.call('POST', '/api/v1/users/me/api-keys', { headers: user.headers, body: { name: 'k' } });
      const first = await gw.call('DELETE', '/api/v1/auth/me', { headers: user.headers });
      assert.equal(first.status, 200, JSON.stringify(first.body));
      assert.equal(first.body.status, 'completed');
      assert.deepEqual(first.body.services.gateway.deleted, {
        identities: 1,
        sessions: 1,
        api_keys: 1,
        ledger_entries: 1,
        followed_jobs: 0,
        open_charges: 0,
        users: 1,
      });
      assert.deepEqual(first.body.services.generation.deleted, { timepoints: 3, jobs: 1 });
      assert.deepEqual(first.body.services.billing.kept, { payments: { count: 2, reason: 'accounting law' } });
      for (const name of services) {
        const calls = gw.upstreams[name].requests.filter((r) => r.method === 'DELETE');
        assert.deepEqual(
          calls.map((r) => r.url),
          [`/api/v1/users/${user.userId}/data`],
          name,
        );
        assert.equal(
          calls[0]!.headers['x-service-key'],
          name === 'generation' || name === 'graph' ? UPSTREAM_KEY : SERVICE_KEY,
          'the key configured for that service',
        );
        assert.equal(first.body.services[name].status, 'deleted');
      }
      const again = await gw.call('DELETE', '/api/v1/auth/me', { headers: user.headers });
      assert.equal(again.status, 200, 'idempotent');
      assert.deepEqual(again.body, first.body);
      assert.equal(gw.upstreams.generation.requests.filter((r) => r.method === 'DELETE').length, 1, 'a confirmed part is not asked again');
      assert.equal((await gw.call('GET', '/api/v1/auth/me', { headers: user.headers })).status, 401);
      assert.equal((await gw.call('POST', '/api/v1/auth/refresh', { body: { refresh_token: user.refresh } })).status, 401);
      const knex = gw.instance.knex;
      for (const table of ['users', 'identities', 'refresh_tokens', 'api_keys', 'credit_ledger']) {
        const column = table === 'users' ? 'id' : 'user_id';
        const [row] = await knex(table).where(column, user.userId).count<{ count: string }[]>('* as count');
        assert.equal(Number(row!.count), 0, `${table} emptied`);
      }
    });
    it('completes a deletion once a service that was down is back, asking each service until it confirms', async () => {
      for (const upstream of Object.values(gw.upstreams)) upstream.reset();
      let billingUp = false;
      gw.upstreams.billing.on('DELETE /api/v1/users/*', (req, res) => {
        if (!billingUp) return void req.socket.destroy();
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ service: 'billing', deleted: { customers: 1 }, kept: {}, notes: [] }));
      });
      // An answer outside the contract is not taken for "nothing there".
      let conductorAnswers = 0;
      gw.upstreams.conductor.on('DELETE /api/v1/users/*', (_req, res) => {
        conductorAnswers += 1;
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(
          conductorAnswers === 1 ? JSON.stringify({ ok: true }) : JSON.stringify({ service: 'conductor', deleted: { conversations: 2 }, kept: {}, notes: [] }),
        );
      });
      const user = await gw.user();
      const first = await gw.call('DELETE', '/api/v1/auth/me', { headers: user.headers });
      assert.equal(first.status, 202, JSON.stringify(first.body));
      assert.equal(first.body.status, 'pending');
      assert.equal(first.body.services.billing.status, 'pending');
      assert.match(first.body.services.billing.error, /billing service could not be reached/);
      assert.match(first.body.services.conductor.error, /outside the account-data contract/);
      assert.equal(first.body.services.generation.status, 'deleted');
      assert.equal((await gw.call('GET', '/api/v1/auth/me', { headers: user.headers })).status, 401, 'every credential stops at once');

      await gw.instance.deps.accounts.deletions.sweep();
      const meanwhile = await gw.call('DELETE', '/api/v1/auth/me', { headers: user.headers });
      assert.equal(meanwhile.body.services.conductor.status, 'deleted');
      assert.equal(meanwhile.body.services.billing.status, 'pending');
      billingUp = true;
      await new Promise((resolve) => setTimeout(resolve, 20));
      await gw.instance.deps.accounts.deletions.sweep();
      const done = await gw.call('DELETE', '/api/v1/auth/me', { headers: user.headers });
      assert.equal(done.status, 200);
      assert.equal(done.body.status, 'completed');
      assert.deepEqual(done.body.services.billing.deleted, { customers: 1 });
      assert.equal(gw.upstreams.generation.requests.filter((r) => r.method === 'DELETE').length, 1, 'generation confirmed once and was not asked again');
      const steps = await gw.instance.knex('account_deletion_steps').where({ user_id: user.userId }).whereNull('done_at');
      assert.equal(steps.length, 0, 'nothing left pending');
    });
  });

  describe('admin and service tokens', () => {
    it('dev token needs the admin key and can set the tier', async () => {
      assert.equal((await gw.call('POST', '/api/v1/auth/dev/token', { body: {} })).status, 401);
      assert.equal((await gw.call('POST', '/api/v1/auth/dev/token', { body: {}, headers: { 'X-Admin-Key': 'wrong' } })).status, 401);
      const reply = await gw.call('POST', '/api/v1/auth/dev/token', { headers: admin, body: { external_id: 'ent', tier: 'enterprise' } });
      assert.equal(reply.status, 201);
      assert.equal(reply.body.user.tier, 'enterprise');
    });
    it('a service token works where the service key does, and other services can verify it', async () => {
      const issued = await gw.call('POST', '/api/v1/auth/service-token', { headers: admin, body: { service: 'conductor', ttl_seconds: 600 } });
      assert.equal(issued.status, 201);
      assert.equal(issued.body.subject, 'service:conductor');
      const resolved = await gw.call('POST', '/api/v1/users/resolve', { headers: bearer(issued.body.access_token), body: { external_id: 'via-token' } });
      assert.equal(resolved.status, 201);
      assert.equal((await gw.call('GET', '/api/v1/credits/balance', { headers: bearer(issued.body.access_token) })).status, 403, 'not a user');
      const { createAccessTokenVerifier } = await import('@tempora/kit/http');
      const verify = createAccessTokenVerifier({ jwksUrl: `${gw.url}/.well-known/jwks.json` });
      assert.equal((await verify(issued.body.access_token)).scope, 'service');
      const user = await gw.user();
      assert.equal((await verify(user.access)).sub, user.userId);
      await assert.rejects(verify(`${b64({ alg: 'none' })}.${b64({ sub: 'x' })}.`), /not valid|algorithm/);
    });
    it('refuses tokens signed with its own key but shaped unlike any it issues, here (401) and where other services verify them', async () => {
      const { kid, privateKey } = gw.instance.deps.auth.keys.signingKey();
      const { JWT_ISSUER: iss, JWT_AUDIENCE: aud } = gw.instance.deps.config;
      const user = await gw.user();
      const now = Math.floor(Date.now() / 1000);
      const forge = (claims: Record<string, unknown>) =>
        new SignJWT({ iss, aud, jti: randomUUID(), iat: now, exp: now + 600, ...claims }).setProtectedHeader({ alg: 'ES256', kid }).sign(privateKey);
      const forged: Record<string, string> = {
        'a service subject without scope service': await forge({ sub: 'service:conductor' }),
        'a subject that is no UUID': await forge({ sub: 'not-a-uuid', tier: 'enterprise' }),
        'no exp': await new SignJWT({ iss, aud, sub: user.userId, jti: randomUUID(), iat: now }).setProtectedHeader({ alg: 'ES256', kid }).sign(privateKey),
        'an iat an hour ahead': await forge({ sub: user.userId, iat: now + 3600, exp: now + 7200 }),
      };
      // What the conductor and the simulation service run, against this gateway's key set.
      const { createAccessTokenVerifier, AccessTokenError } = await import('@tempora/kit/http');
      const verify = createAccessTokenVerifier({ jwksUrl: `${gw.url}/.well-known/jwks.json`, issuer: iss, audience: aud });
      for (const [name, token] of Object.entries(forged)) {
        const reply = await gw.call('GET', '/api/v1/credits/balance', { headers: bearer(token) });
        assert.equal(reply.status, 401, `${name}: ${JSON.stringify(reply.body)}`);
        assert.match(reply.headers.get('www-authenticate') ?? '', /invalid_token/, name);
        await assert.rejects(verify(token), AccessTokenError, name);
      }
    });
  });

  describe('users/resolve', () => {
    it('is safe under concurrent calls: one external id, one user', async () => {
      const replies = await Promise.all(
        Array.from({ length: 20 }, () =>
          gw.call('POST', '/api/v1/users/resolve', { headers: service, body: { external_id: 'race-1', email: 'race@example.com' } }),
        ),
      );
      const ids = new Set(replies.map((r) => r.body.user.id));
      assert.equal(ids.size, 1);
      assert.equal(replies.filter((r) => r.status === 201).length, 1);
      assert.equal(replies.filter((r) => r.status === 200).length, 19);
      const balance = await gw.instance.repository.ledger.balance([...ids][0]!);
      assert.equal(balance, 50, 'one signup grant');
    });
  });

  describe('JWKS and key rotation', () => {
    it('publishes the signing key, persists a generated key, and keeps the old key until its tokens expire', async () => {
      const before = await gw.call('GET', '/.well-known/jwks.json');
      assert.equal(before.status, 200);
      assert.equal(before.body.keys.length, 1);
      assert.equal(before.body.keys[0].alg, 'ES256');
      assert.equal(before.body.keys[0].d, undefined, 'no private part');
      const oldUser = await gw.user();
      const newKid = gw.instance.deps.auth.keys.rotate();
      const after = await gw.call('GET', '/.well-known/jwks.json');
      assert.deepEqual(after.body.keys.map((k: { kid: string }) => k.kid).sort(), [before.body.keys[0].kid, newKid].sort());
      assert.equal((await gw.call('GET', '/api/v1/auth/me', { headers: oldUser.headers })).status, 200, 'old token still verifies');
      const newUser = await gw.user();
      assert.equal(JSON.parse(Buffer.from(newUser.access.split('.')[0]!, 'base64url').toString()).kid, newKid);
      const { KeyStore } = await import('../src/domain/keys.ts');
      let now = Date.now();
      const reopened = new KeyStore({ file: `${gw.dataDir}/gateway-keys/signing-keys.json`, rotationMs: 1e12, retainMs: 1000, now: () => now });
      assert.equal(reopened.signingKey().kid, newKid, 'the generated key survives a restart');
      now += 5000;
      assert.deepEqual(
        reopened.jwks().keys.map((k) => k.kid),
        [newKid],
        'retired key dropped after its tokens expired',
      );
    });
  });
});
