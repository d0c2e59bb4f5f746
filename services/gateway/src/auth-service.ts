import { notFound, Problem, type RateLimiter } from '@tempora/kit/http';
import { jwtVerify } from 'jose';
import type { AuthCache } from './auth-cache.ts';
import type { GatewayConfig } from './config.ts';
import { claimsProblem } from './credentials.ts';
import type { KeyStore } from './domain/keys.ts';
import { demoWindow, type Tier } from './domain/limits.ts';
import type { ExternalIdentity, GitHubSignIn, OidcVerifier } from './domain/providers.ts';
import type { AccessClaims, TokenPair, TokenService } from './domain/tokens.ts';
import type { GatewayMetrics } from './metrics.ts';
import type { GatewayRepository, IdentityRow, UserRow } from './repository/index.ts';

export interface AuthDeps {
  config: GatewayConfig;
  repository: GatewayRepository;
  tokens: TokenService;
  keys: KeyStore;
  providers: { apple: OidcVerifier; google: OidcVerifier; github: GitHubSignIn };
  limiter: RateLimiter;
  metrics: GatewayMetrics;
  /** Cleared after every change to who may authenticate as what. */
  authCache: AuthCache;
}

/** A sign-in's outcome: a token pair for the user, new (`created`, with its signup grant) or not. */
export interface SignedIn {
  pair: TokenPair;
  user: UserRow;
  identities: IdentityRow[];
  created: boolean;
}

/** The demo sign-in window of an address as it stands after this attempt. */
export type DemoWindowState = Awaited<ReturnType<RateLimiter['consume']>>;

/** RFC 7662: an inactive token gets `{active: false}` and nothing else. */
export type Introspection =
  | { active: false }
  | {
      active: true;
      token_type: 'access_token';
      sub: string;
      jti: string;
      iat: number;
      exp: number;
      iss: string;
      aud: string | string[];
      scope?: 'service';
      tier?: Tier;
    };

/** What a newcomer meets after a few tours in an hour: what happened, when to retry, and what to do meanwhile. */
function demoLimitReached(perHour: number, retryAfter: number): Problem {
  const wait = retryAfter < 120 ? `${retryAfter} s` : `${Math.ceil(retryAfter / 60)} min`;
  return new Problem(
    429,
    `this address has used its ${perHour} demo sign-ins of the hour (each creates a new demo account); the next is possible in ${wait}. Meanwhile, keep using a demo account you have: POST /api/v1/auth/refresh renews its tokens.`,
    {
      title: 'Demo sign-in limit reached',
      type: 'https://tempora.dev/problems/demo-sign-in-limit',
      extensions: { limit: perHour, retry_after: retryAfter, retry_at: new Date(Date.now() + retryAfter * 1000).toISOString() },
      headers: { 'Retry-After': String(retryAfter) },
    },
  );
}

const inactive: Introspection = { active: false };

/**
 * Signing in and the tokens' lifecycle, independent of HTTP: sign-in with a provider (or as a demo or
 * development user), refresh, sign-out, service tokens, the published keys and token introspection.
 */
export class AuthService {
  private readonly deps: AuthDeps;
  private readonly config: GatewayConfig;
  private readonly repository: GatewayRepository;
  readonly tokens: TokenService;
  readonly keys: KeyStore;
  /** The identity providers that prove a sign-in (and a link, accounts-service.ts). */
  readonly providers: AuthDeps['providers'];

  constructor(deps: AuthDeps) {
    this.deps = deps;
    this.config = deps.config;
    this.repository = deps.repository;
    this.tokens = deps.tokens;
    this.keys = deps.keys;
    this.providers = deps.providers;
  }

  jwks() {
    return this.keys.jwks();
  }

  /** Signs in the user of the identity `prove` establishes, creating it at the first sign-in; counted by outcome. */
  async signIn(provider: string, prove: () => Promise<ExternalIdentity>, extraName?: string): Promise<SignedIn> {
    try {
      const identity = await prove();
      const { user, created } = await this.repository.users.findOrCreateByIdentity({
        provider: identity.provider,
        subject: identity.subject,
        email: identity.email,
        name: identity.name ?? extraName ?? null,
        signupCredits: this.config.SIGNUP_CREDITS,
      });
      this.deps.metrics.signIns.inc({ provider: identity.provider, outcome: created ? 'signup' : 'signin' });
      return await this.signedIn(user, created);
    } catch (error) {
      this.deps.metrics.signIns.inc({ provider, outcome: error instanceof Problem && error.status === 401 ? 'refused' : 'error' });
      throw error;
    }
  }

  /**
   * A fresh demo account, signed in, within the address's hourly allowance. `report` is told how the
   * allowance stands before a refusal is thrown, so the refusal can carry it too.
   */
  async demoSignIn(ip: string, report: (state: DemoWindowState) => void): Promise<SignedIn> {
    const { config } = this;
    if (!config.DEMO_ENABLED) throw new Problem(403, 'demo sign-in is disabled on this gateway');
    const window = demoWindow(ip, { perHour: config.DEMO_SIGNINS_PER_HOUR, loopbackPerHour: config.DEMO_SIGNINS_PER_HOUR_LOOPBACK });
    const state = await this.deps.limiter.consume([window]);
    report(state);
    if (state.limited) {
      this.deps.metrics.rateLimited.inc({ window: 'demo-signin' });
      throw demoLimitReached(window.points, state.resetSeconds);
    }
    const { user } = await this.repository.users.findOrCreateByIdentity({
      provider: 'demo',
      subject: crypto.randomUUID(),
      name: 'Demo user',
      isDemo: true,
      signupCredits: config.DEMO_CREDITS,
    });
    this.deps.metrics.signIns.inc({ provider: 'demo', outcome: 'signup' });
    return this.signedIn(user, true);
  }

  /** A token pair for an existing user, or for the development user of `externalId` (found or created); sets its tier when given. */
  async devSignIn(request: {
    userId?: string | undefined;
    externalId: string;
    email?: string | undefined;
    name?: string | undefined;
    tier?: Tier | undefined;
  }) {
    let user: UserRow | undefined;
    let created = false;
    if (request.userId) {
      user = await this.repository.users.findUser(request.userId);
      if (!user) throw notFound(`no user ${request.userId}`);
    } else {
      ({ user, created } = await this.repository.users.findOrCreateByIdentity({
        provider: 'dev',
        subject: request.externalId,
        email: request.email,
        name: request.name,
        signupCredits: this.config.SIGNUP_CREDITS,
      }));
    }
    if (request.tier && request.tier !== user.tier) {
      await this.repository.users.setTier(user.id, request.tier);
      this.deps.authCache.clear();
      user = { ...user, tier: request.tier };
    }
    return this.signedIn(user, created);
  }

  refresh(refreshToken: string): Promise<TokenPair> {
    return this.tokens.refresh(refreshToken);
  }

  /** Ends the session of `refreshToken`, or every session of the user, and revokes the access token presented. */
  async logout(userId: string, refreshToken: string | undefined, access: { jti: string; exp: number } | undefined): Promise<void> {
    await this.tokens.logout(userId, refreshToken, access);
    this.deps.authCache.clear();
  }

  /** A service token valid for `ttlSeconds` (an hour by default), at most SERVICE_TOKEN_MAX_TTL_SECONDS. */
  async serviceToken(service: string, ttlSeconds: number | undefined): Promise<{ token: string; ttl: number }> {
    const ttl = Math.min(ttlSeconds ?? 3600, this.config.SERVICE_TOKEN_MAX_TTL_SECONDS);
    const issued = await this.tokens.serviceToken(service, ttl);
    return { token: issued.token, ttl };
  }

  /**
   * Whether an access token is active now: signature, issuer, audience, expiry, and the revocations a
   * local JWKS check cannot see (sign-out, sign-out of every session, account deletion).
   */
  async introspect(token: string): Promise<Introspection> {
    let claims: AccessClaims;
    try {
      const verified = await jwtVerify(
        token,
        async (header) => {
          const key = this.keys.publicKey(header.kid);
          if (!key) throw new Error('unknown key');
          return key;
        },
        { algorithms: ['ES256'], issuer: this.config.JWT_ISSUER, audience: this.config.JWT_AUDIENCE, requiredClaims: ['sub', 'exp', 'iat', 'jti'] },
      );
      claims = verified.payload as unknown as AccessClaims;
    } catch {
      return inactive;
    }
    if (claimsProblem(claims)) return inactive;
    const common = {
      active: true as const,
      token_type: 'access_token' as const,
      sub: claims.sub,
      jti: claims.jti,
      iat: claims.iat,
      exp: claims.exp,
      iss: claims.iss,
      aud: claims.aud,
    };
    if (claims.scope === 'service' && claims.sub.startsWith('service:')) return { ...common, scope: 'service' };
    const found = await this.repository.users.userForToken(claims.sub, claims.jti);
    if (!found || found.revoked) return inactive;
    // The same rule as the gateway's own check: a sign-out of every session voids tokens issued before it.
    const validAfter = found.user.tokens_valid_after?.getTime();
    if (validAfter !== undefined && claims.iat * 1000 < validAfter - 999) return inactive;
    return { ...common, tier: found.user.tier };
  }

  private async signedIn(user: UserRow, created: boolean): Promise<SignedIn> {
    const pair = await this.tokens.signIn(user);
    return { pair, user, identities: await this.repository.users.identitiesOf(user.id), created };
  }
}
