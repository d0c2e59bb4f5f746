/**
 * Every kind of credential the authorization matrix presents, as request headers, for one platform: valid
 * ones issued by the platform itself (demo sign-ins, API keys with each scope) and invalid ones made here
 * (an expired token signed with the gateway's real key, a forged one, HS256 and `alg: none` tokens).
 */
import { createPublicKey, type KeyObject, randomUUID } from 'node:crypto';
import { calculateJwkThumbprint, exportJWK, generateKeyPair, SignJWT } from 'jose';
import { SECRETS, type SecurityPlatform, SIGNING_KEY } from './platform.ts';

export const KINDS = [
  'none',
  'expiredJwt',
  'forgedJwt',
  'hs256Jwt',
  'algNoneJwt',
  'userJwt',
  'apiKeyRead',
  'apiKeyWrite',
  'serviceKey',
  'gatewayUser',
  'spoofedUser',
  'wrongServiceKey',
  'adminKey',
  'writerToken',
  'simulationKey',
] as const;
export type Kind = (typeof KINDS)[number];

export interface SignedIn {
  id: string;
  access: string;
  refresh: string;
}

export interface Credentials {
  /** User A: every user credential of the matrix is theirs. */
  alice: SignedIn;
  /** User B: the other user of the ownership checks. */
  bob: SignedIn;
  apiKeys: { read: string; write: string };
  headers(kind: Kind): Record<string, string>;
  /** A fresh signed-in user, for operations that end the caller's session or account. */
  freshUser(): Promise<SignedIn>;
}

async function json(response: Response): Promise<any> {
  const text = await response.text();
  if (!response.ok) throw new Error(`${response.url}: ${response.status} ${text.slice(0, 300)}`);
  return JSON.parse(text);
}

export async function signIn(gateway: string): Promise<SignedIn> {
  const body = await json(await fetch(`${gateway}/api/v1/auth/demo`, { method: 'POST' }));
  return { id: body.user.id, access: body.access_token, refresh: body.refresh_token };
}

async function apiKey(gateway: string, user: SignedIn, scopes: string[]): Promise<string> {
  const body = await json(
    await fetch(`${gateway}/api/v1/users/me/api-keys`, {
      method: 'POST',
      headers: { authorization: `Bearer ${user.access}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: `matrix-${scopes.join('-')}`, scopes }),
    }),
  );
  return body.key;
}

const claims = (sub: string) => ({ sub, tier: 'enterprise', jti: randomUUID() });

async function kidOf(key: KeyObject): Promise<string> {
  return calculateJwkThumbprint(await exportJWK(createPublicKey(key)));
}

export async function credentials(platform: SecurityPlatform): Promise<Credentials> {
  const gateway = platform.urls.gateway;
  const [alice, bob] = [await signIn(gateway), await signIn(gateway)];
  const apiKeys = { read: await apiKey(gateway, alice, ['read']), write: await apiKey(gateway, alice, ['write']) };
  const kid = await kidOf(SIGNING_KEY);
  const now = Math.floor(Date.now() / 1000);
  /** A token right in every claim the gateway checks, under the gateway's key id, issued `age` seconds ago. */
  const token = (alg: 'ES256' | 'HS256', key: Parameters<SignJWT['sign']>[0], age: number) =>
    new SignJWT(claims(alice.id))
      .setProtectedHeader({ alg, kid })
      .setIssuer('tempora-gateway')
      .setAudience('tempora')
      .setIssuedAt(now - age)
      .setExpirationTime(now - age + 900)
      .sign(key);
  // Signed with the gateway's own key; expired an hour ago.
  const expired = await token('ES256', SIGNING_KEY, 4500);
  // Signed by a key that is not the gateway's.
  const forged = await token('ES256', (await generateKeyPair('ES256')).privateKey, 0);
  // Algorithm confusion: HMAC keyed with the gateway's published public key.
  const hs256 = await token('HS256', new TextEncoder().encode(createPublicKey(SIGNING_KEY).export({ type: 'spki', format: 'pem' }) as string), 0);
  const b64 = (value: object) => Buffer.from(JSON.stringify(value)).toString('base64url');
  const algNone = `${b64({ alg: 'none', typ: 'JWT' })}.${b64({ ...claims(alice.id), iss: 'tempora-gateway', aud: 'tempora', iat: now, exp: now + 900 })}.`;

  const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
  const table: Record<Kind, Record<string, string>> = {
    none: {},
    expiredJwt: bearer(expired),
    forgedJwt: bearer(forged),
    hs256Jwt: bearer(hs256),
    algNoneJwt: bearer(algNone),
    userJwt: bearer(alice.access),
    apiKeyRead: { 'x-api-key': apiKeys.read },
    apiKeyWrite: { 'x-api-key': apiKeys.write },
    serviceKey: { 'x-service-key': SECRETS.serviceKey },
    // What the gateway's proxy sends for a signed-in user.
    gatewayUser: { 'x-service-key': SECRETS.serviceKey, 'x-user-id': alice.id, 'x-user-tier': 'free' },
    // The same identity claims from someone without the key.
    spoofedUser: { 'x-user-id': alice.id, 'x-user-tier': 'enterprise', 'x-forwarded-for': '10.0.0.1' },
    wrongServiceKey: { 'x-service-key': `${SECRETS.serviceKey}x` },
    adminKey: { 'x-admin-key': SECRETS.adminKey },
    writerToken: bearer(SECRETS.writerToken),
    simulationKey: { 'x-api-key': SECRETS.simulationKey },
  };
  return {
    alice,
    bob,
    apiKeys,
    headers: (kind) => ({ ...table[kind] }),
    freshUser: () => signIn(gateway),
  };
}
