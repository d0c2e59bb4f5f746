/**
 * Local identity providers speaking the real protocols, with keys the tests generate: an OIDC issuer
 * (Apple and Google: a JWKS endpoint and signed ID tokens) and GitHub's OAuth code exchange and user API.
 */
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, generateKeyPair, type JWTPayload, SignJWT } from 'jose';

async function listen(server: Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

const readBody = async (request: IncomingMessage) => {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
};

export interface OidcProvider {
  url: string;
  jwksUrl: string;
  issuer: string;
  /** An ID token signed with the published key; `options.key: 'rogue'` signs with a key that is not published. */
  sign(claims: JWTPayload, options?: { key?: 'published' | 'rogue'; expiresIn?: number; issuer?: string; audience?: string; alg?: 'RS256' }): Promise<string>;
  jwksRequests: number;
  close(): Promise<void>;
}

export async function startOidcProvider(issuer: string, audience: string): Promise<OidcProvider> {
  const published = await generateKeyPair('RS256', { extractable: true });
  const rogue = await generateKeyPair('RS256', { extractable: true });
  const jwk = { ...(await exportJWK(published.publicKey)), kid: 'idp-key-1', alg: 'RS256', use: 'sig' };
  const state = { jwksRequests: 0 };
  const server = createServer((request, response) => {
    if (request.url === '/keys') {
      state.jwksRequests += 1;
      response.writeHead(200, { 'content-type': 'application/json' });
      response.end(JSON.stringify({ keys: [jwk] }));
      return;
    }
    response.writeHead(404).end();
  });
  const url = await listen(server);
  return {
    url,
    jwksUrl: `${url}/keys`,
    issuer,
    get jwksRequests() {
      return state.jwksRequests;
    },
    async sign(claims, options = {}) {
      const now = Math.floor(Date.now() / 1000);
      const key = options.key === 'rogue' ? rogue.privateKey : published.privateKey;
      return new SignJWT(claims)
        .setProtectedHeader({ alg: 'RS256', kid: 'idp-key-1' })
        .setIssuer(options.issuer ?? issuer)
        .setAudience(options.audience ?? audience)
        .setIssuedAt(now - 10)
        .setExpirationTime(now + (options.expiresIn ?? 600))
        .sign(key);
    },
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

export interface GitHubProvider {
  url: string;
  tokenUrl: string;
  apiUrl: string;
  clientId: string;
  clientSecret: string;
  /** Registers a one-time authorization code for a GitHub user. */
  issueCode(user: { id: number; login: string; name?: string; email?: string | null }): string;
  /** Makes the user API answer this status for every token. */
  userApiStatus: number;
  close(): Promise<void>;
}

export async function startGitHub(): Promise<GitHubProvider> {
  const codes = new Map<string, { id: number; login: string; name?: string; email?: string | null }>();
  const tokens = new Map<string, { id: number; login: string; name?: string; email?: string | null }>();
  let counter = 0;
  const provider = {
    clientId: 'gh-client-id',
    clientSecret: 'gh-client-secret',
    userApiStatus: 200,
  };
  const server = createServer(async (request, response) => {
    const json = (status: number, body: unknown) => {
      response.writeHead(status, { 'content-type': 'application/json' });
      response.end(JSON.stringify(body));
    };
    if (request.method === 'POST' && request.url === '/login/oauth/access_token') {
      const text = await readBody(request);
      const body = (request.headers['content-type'] ?? '').includes('json') ? JSON.parse(text) : Object.fromEntries(new URLSearchParams(text));
      // GitHub answers every refused exchange with 200 and an error field.
      if (body.client_id !== provider.clientId || body.client_secret !== provider.clientSecret) {
        return json(200, { error: 'incorrect_client_credentials', error_description: 'The client_id and/or client_secret passed are incorrect.' });
      }
      const user = codes.get(body.code);
      if (!user) return json(200, { error: 'bad_verification_code', error_description: 'The code passed is incorrect or expired.' });
      codes.delete(body.code);
      const token = `gho_${(counter += 1)}`;
      tokens.set(token, user);
      return json(200, { access_token: token, token_type: 'bearer', scope: 'read:user,user:email' });
    }
    if (request.method === 'GET' && request.url === '/user') {
      if (provider.userApiStatus !== 200) return json(provider.userApiStatus, { message: 'Bad credentials' });
      const user = tokens.get((request.headers.authorization ?? '').replace(/^Bearer /, ''));
      if (!user) return json(401, { message: 'Bad credentials' });
      return json(200, { login: user.login, id: user.id, name: user.name ?? null, email: user.email ?? null });
    }
    json(404, { message: 'Not Found' });
  });
  const url = await listen(server);
  return Object.assign(provider, {
    url,
    tokenUrl: `${url}/login/oauth/access_token`,
    apiUrl: url,
    issueCode(user: { id: number; login: string; name?: string; email?: string | null }) {
      const code = `code-${(counter += 1)}-${user.id}`;
      codes.set(code, user);
      return code;
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  });
}
