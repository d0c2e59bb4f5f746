import { Problem, unauthorized } from '@tempora/kit/http';
import { createRemoteJWKSet, type JWTPayload, errors as joseErrors, jwtVerify } from 'jose';
import { request } from 'undici';
import { sha256 } from './secrets.ts';

export type ProviderName = 'apple' | 'google' | 'github';

/** What a provider vouches for: a stable subject, and an email when it has one. */
export interface ExternalIdentity {
  provider: ProviderName;
  subject: string;
  email: string | null;
  name: string | null;
}

const refused = (provider: string, detail: string) => unauthorized(`${provider} sign-in refused: ${detail}`, `Bearer realm="tempora", error="invalid_token"`);
const notConfigured = (provider: string) => new Problem(503, `sign-in with ${provider} is not configured on this gateway`);
const unreachable = (provider: string) => new Problem(502, `${provider} could not be reached to verify the sign-in; try again`);

function explain(error: unknown): string {
  if (error instanceof joseErrors.JWTExpired) return 'the token has expired';
  if (error instanceof joseErrors.JWTClaimValidationFailed) return `claim ${error.claim} is not valid (${error.reason})`;
  if (error instanceof joseErrors.JWSSignatureVerificationFailed) return 'the signature does not verify';
  if (error instanceof joseErrors.JWKSNoMatchingKey) return 'no published key matches the token';
  if (error instanceof joseErrors.JOSEAlgNotAllowed) return 'the signing algorithm is not accepted';
  if (error instanceof joseErrors.JWSInvalid || error instanceof joseErrors.JWTInvalid) return 'the token is malformed';
  return 'the token is not valid';
}

/** The provider's key set could not be fetched: a failure on our side of the sign-in, not a refusal. */
const isFetchFailure = (error: unknown) =>
  error instanceof joseErrors.JWKSTimeout || error instanceof TypeError || (error instanceof joseErrors.JOSEError && /Expected 200 OK/i.test(error.message));

export interface OidcSettings {
  name: 'apple' | 'google';
  issuers: string[];
  jwksUrl: string;
  audiences: string[];
  timeoutMs: number;
}

/** An OpenID Connect ID-token verifier (Apple, Google): signature against the provider's JWKS, issuer, audience, expiry, nonce. */
export class OidcVerifier {
  private readonly settings: OidcSettings;
  private readonly jwks: ReturnType<typeof createRemoteJWKSet>;

  constructor(settings: OidcSettings) {
    this.settings = settings;
    this.jwks = createRemoteJWKSet(new URL(settings.jwksUrl), { timeoutDuration: settings.timeoutMs, cooldownDuration: 30_000, cacheMaxAge: 3_600_000 });
  }

  /**
   * `nonce`, when the client sends it, must match the token's nonce claim either as sent or as its SHA-256
   * hex digest (Apple's and Firebase's clients put the hash in the request and keep the raw value).
   */
  async verify(token: string, nonce?: string): Promise<ExternalIdentity> {
    const { name } = this.settings;
    if (this.settings.audiences.length === 0) throw notConfigured(name);
    let payload: JWTPayload;
    try {
      ({ payload } = await jwtVerify(token, this.jwks, {
        issuer: this.settings.issuers,
        audience: this.settings.audiences,
        algorithms: ['RS256', 'ES256'],
        requiredClaims: ['sub', 'exp', 'iat'],
        clockTolerance: 30,
      }));
    } catch (error) {
      if (isFetchFailure(error)) throw unreachable(name);
      throw refused(name, explain(error));
    }
    if (nonce !== undefined) {
      const claimed = payload.nonce;
      if (typeof claimed !== 'string' || (claimed !== nonce && claimed !== sha256(nonce))) throw refused(name, 'the nonce does not match');
    }
    const verified = payload.email_verified === true || payload.email_verified === 'true';
    const email = typeof payload.email === 'string' && verified ? payload.email : null;
    return { provider: name, subject: String(payload.sub), email, name: typeof payload.name === 'string' ? payload.name : null };
  }
}

export interface GitHubSettings {
  clientId: string | undefined;
  clientSecret: string | undefined;
  tokenUrl: string;
  apiUrl: string;
  timeoutMs: number;
}

/** GitHub's OAuth web flow, server side: exchange the code, then ask the user API who it is. */
export class GitHubSignIn {
  private readonly settings: GitHubSettings;
  constructor(settings: GitHubSettings) {
    this.settings = settings;
  }

  private async call(url: string, init: { method: 'GET' | 'POST'; headers: Record<string, string>; body?: string }) {
    try {
      const response = await request(url, { ...init, headersTimeout: this.settings.timeoutMs, bodyTimeout: this.settings.timeoutMs });
      const text = await response.body.text();
      let json: Record<string, unknown> = {};
      try {
        json = JSON.parse(text) as Record<string, unknown>;
      } catch {
        // handled by the callers through the status and missing fields
      }
      return { status: response.statusCode, json };
    } catch {
      throw unreachable('github');
    }
  }

  async verify(code: string, redirectUri?: string, codeVerifier?: string): Promise<ExternalIdentity> {
    const { clientId, clientSecret } = this.settings;
    if (!clientId || !clientSecret) throw notConfigured('github');
    const exchange = await this.call(this.settings.tokenUrl, {
      method: 'POST',
      headers: { accept: 'application/json', 'content-type': 'application/json', 'user-agent': 'tempora-gateway' },
      body: JSON.stringify({
        client_id: clientId,
        client_secret: clientSecret,
        code,
        ...(redirectUri ? { redirect_uri: redirectUri } : {}),
        ...(codeVerifier ? { code_verifier: codeVerifier } : {}),
      }),
    });
    // GitHub answers a refused exchange with 200 and an `error` field.
    if (typeof exchange.json.error === 'string')
      throw refused('github', `${exchange.json.error}${exchange.json.error_description ? ` (${String(exchange.json.error_description)})` : ''}`);
    if (exchange.status >= 500) throw unreachable('github');
    const accessToken = exchange.json.access_token;
    if (exchange.status !== 200 || typeof accessToken !== 'string') throw refused('github', 'the code exchange returned no access token');
    const user = await this.call(`${this.settings.apiUrl.replace(/\/$/, '')}/user`, {
      method: 'GET',
      headers: {
        accept: 'application/vnd.github+json',
        authorization: `Bearer ${accessToken}`,
        'user-agent': 'tempora-gateway',
        'x-github-api-version': '2022-11-28',
      },
    });
    if (user.status >= 500) throw unreachable('github');
    if (user.status !== 200 || (typeof user.json.id !== 'number' && typeof user.json.id !== 'string'))
      throw refused('github', 'the user API did not accept the token');
    return {
      provider: 'github',
      subject: String(user.json.id),
      email: typeof user.json.email === 'string' ? user.json.email : null,
      name: typeof user.json.name === 'string' ? user.json.name : typeof user.json.login === 'string' ? user.json.login : null,
    };
  }
}
