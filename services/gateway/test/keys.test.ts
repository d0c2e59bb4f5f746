import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigError, loadConfig } from '@tempora/kit/runtime';
import { GatewayConfigSchema } from '../src/config.ts';
import { JwkSetSchema, KeyStore, thumbprint } from '../src/domain/keys.ts';

describe('gateway: signing keys', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'gateway-keys-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it("uses a configured PEM key, writes nothing, and publishes an operator's previous key", () => {
    const current = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const previous = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const previousJwk = previous.publicKey.export({ format: 'jwk' });
    const file = join(dir, 'k.json');
    const store = new KeyStore({
      configuredKey: current.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
      previousKeys: JwkSetSchema.parse({ keys: [previousJwk] }),
      file,
      rotationMs: 1,
      retainMs: 1000,
    });
    const kid = thumbprint(current.publicKey.export({ format: 'jwk' }));
    assert.equal(store.signingKey().kid, kid, 'a configured key is never rotated by the gateway');
    assert.deepEqual(
      store
        .jwks()
        .keys.map((k) => k.kid)
        .sort(),
      [kid, thumbprint(previousJwk)].sort(),
    );
    assert.ok(store.publicKey(thumbprint(previousJwk)));
    assert.equal(existsSync(file), false);
  });

  it('accepts a configured private JWK and refuses keys that are not P-256', () => {
    const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const store = new KeyStore({
      configuredKey: JSON.stringify(privateKey.export({ format: 'jwk' })),
      file: join(dir, 'k.json'),
      rotationMs: 1e9,
      retainMs: 1000,
    });
    assert.equal(store.jwks().keys.length, 1);
    const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 });
    assert.throws(
      () =>
        new KeyStore({
          configuredKey: rsa.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
          file: join(dir, 'k.json'),
          rotationMs: 1e9,
          retainMs: 1000,
        }),
      /P-256/,
    );
  });

  it('rotates a generated key when it reaches its age, keeping the old one until its tokens expire', () => {
    let now = 1_000_000;
    const file = join(dir, 'k.json');
    const store = new KeyStore({ file, rotationMs: 10_000, retainMs: 5_000, now: () => now });
    const first = store.signingKey().kid;
    now += 10_000;
    const second = store.signingKey().kid;
    assert.notEqual(second, first);
    assert.deepEqual(
      store.jwks().keys.map((k) => k.kid),
      [first, second],
    );
    now += 5_001;
    assert.deepEqual(
      store.jwks().keys.map((k) => k.kid),
      [second],
    );
    assert.equal(store.publicKey(first), undefined);
    assert.equal(new KeyStore({ file, rotationMs: 10_000, retainMs: 5_000, now: () => now }).signingKey().kid, second, 'persisted');
  });

  it('refuses a keys file it did not write, naming the file, and leaves it as it is', () => {
    const file = join(dir, 'k.json');
    for (const content of [
      'not json',
      '{"keys": [{"kid": "a"}]}',
      '{"keys": [{"kid": "a", "private_jwk": {"kty": "RSA"}, "created_at": 1, "retired_at": null}]}',
    ]) {
      writeFileSync(file, content);
      assert.throws(
        () => new KeyStore({ file, rotationMs: 1e9, retainMs: 1000 }),
        (err: Error) => err.message.startsWith(file),
      );
    }
  });

  it('refuses a JWT_PREVIOUS_KEYS that is not a JWK Set of P-256 keys, naming the variable', () => {
    const { publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const jwk = publicKey.export({ format: 'jwk' });
    assert.deepEqual(loadConfig(GatewayConfigSchema, { JWT_PREVIOUS_KEYS: JSON.stringify({ keys: [jwk] }) }).JWT_PREVIOUS_KEYS, { keys: [jwk] });
    for (const value of ['kid-1', JSON.stringify([jwk]), JSON.stringify({ keys: [{ ...jwk, crv: 'P-384' }] })]) {
      assert.throws(
        () => loadConfig(GatewayConfigSchema, { JWT_PREVIOUS_KEYS: value }),
        (err: Error) => err instanceof ConfigError && /JWT_PREVIOUS_KEYS/.test(err.message),
      );
    }
  });
});
