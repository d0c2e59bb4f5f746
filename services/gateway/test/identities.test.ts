import assert from 'node:assert/strict';
import { bearer, type GatewayHarness, useGateway } from './harness.ts';

describe('gateway: linking sign-in providers to one account', function () {
  this.timeout(60_000);
  let gw: GatewayHarness;
  useGateway((started) => {
    gw = started;
  });

  const signIn = async (sub: string) => {
    const reply = await gw.call('POST', '/api/v1/auth/apple', { body: { identity_token: await gw.apple.sign({ sub, email: `${sub}@example.com` }) } });
    assert.ok(reply.status === 200 || reply.status === 201, JSON.stringify(reply.body));
    return { userId: reply.body.user.id as string, headers: bearer(reply.body.access_token) };
  };

  it('links a Google sign-in proven as at sign-in; signing in with it then reaches the same account and credits', async () => {
    const apple = await signIn('link-apple-1');
    const proof = { id_token: await gw.google.sign({ sub: 'link-google-1', email: 'one@example.com', email_verified: true }) };
    const linked = await gw.call('POST', '/api/v1/auth/me/identities/google', { headers: apple.headers, body: proof });
    assert.equal(linked.status, 201, JSON.stringify(linked.body));
    assert.deepEqual([linked.body.provider, linked.body.subject], ['google', 'link-google-1']);
    assert.equal((await gw.call('POST', '/api/v1/auth/me/identities/google', { headers: apple.headers, body: proof })).status, 200, 'again: already linked');

    const viaGoogle = await gw.call('POST', '/api/v1/auth/google', { body: { id_token: await gw.google.sign({ sub: 'link-google-1' }) } });
    assert.equal(viaGoogle.status, 200, 'an existing account, not a new one');
    assert.equal(viaGoogle.body.user.id, apple.userId);
    assert.deepEqual(viaGoogle.body.user.providers.sort(), ['apple', 'google']);
    const list = await gw.call('GET', '/api/v1/auth/me/identities', { headers: apple.headers });
    assert.deepEqual([list.body.total, list.body.items.map((identity: { provider: string }) => identity.provider)], [2, ['apple', 'google']]);
  });

  it('refuses an identity that signs in to another account (409), never merging the two', async () => {
    const first = await signIn('link-apple-2');
    const second = await signIn('link-apple-3');
    const taken = await gw.call('POST', '/api/v1/auth/me/identities/apple', {
      headers: second.headers,
      body: { identity_token: await gw.apple.sign({ sub: 'link-apple-2' }) },
    });
    assert.equal(taken.status, 409);
    assert.equal(taken.headers.get('content-type'), 'application/problem+json');
    const stillFirst = await gw.call('POST', '/api/v1/auth/apple', { body: { identity_token: await gw.apple.sign({ sub: 'link-apple-2' }) } });
    assert.equal(stillFirst.body.user.id, first.userId);
  });

  it('refuses a proof the provider did not sign, and an API key or no credential', async () => {
    const user = await signIn('link-apple-4');
    const forged = await gw.call('POST', '/api/v1/auth/me/identities/google', {
      headers: user.headers,
      body: { id_token: await gw.google.sign({ sub: 'x' }, { key: 'rogue' }) },
    });
    assert.equal(forged.status, 401);
    assert.equal((await gw.call('POST', '/api/v1/auth/me/identities/google', { headers: user.headers, body: {} })).status, 422);
    const key = (await gw.call('POST', '/api/v1/users/me/api-keys', { headers: user.headers, body: { name: 'k' } })).body.key as string;
    const byKey = await gw.call('POST', '/api/v1/auth/me/identities/google', {
      headers: { 'X-API-Key': key },
      body: { id_token: await gw.google.sign({ sub: 'link-google-key' }) },
    });
    assert.equal(byKey.status, 403, 'a leaked key cannot add a way into the account');
    assert.equal((await gw.call('GET', '/api/v1/auth/me/identities')).status, 401);
  });

  it('unlinks one identity while another remains, never the last', async () => {
    const user = await signIn('link-apple-5');
    assert.equal((await gw.call('DELETE', '/api/v1/auth/me/identities/apple/link-apple-5', { headers: user.headers })).status, 409, 'the last way in');
    assert.equal(
      (
        await gw.call('POST', '/api/v1/auth/me/identities/google', {
          headers: user.headers,
          body: { id_token: await gw.google.sign({ sub: 'link-google-5' }) },
        })
      ).status,
      201,
    );
    assert.equal((await gw.call('DELETE', '/api/v1/auth/me/identities/apple/nobody', { headers: user.headers })).status, 404);
    assert.equal((await gw.call('DELETE', '/api/v1/auth/me/identities/apple/link-apple-5', { headers: user.headers })).status, 204);
    const fresh = await gw.call('POST', '/api/v1/auth/apple', { body: { identity_token: await gw.apple.sign({ sub: 'link-apple-5' }) } });
    assert.equal(fresh.status, 201, 'an unlinked identity signs in to a new account');
    assert.notEqual(fresh.body.user.id, user.userId);
  });
});
