import { randomUUID } from 'node:crypto';
import { unauthorized } from '@tempora/kit/http';
import { SignJWT } from 'jose';
import type { GatewayRepository, UserRow } from '../repository/index.ts';
import type { KeyStore } from './keys.ts';
import type { Tier } from './limits.ts';
import { opaqueSecret, REFRESH_TOKEN_PREFIX, sha256 } from './secrets.ts';

export const BEARER_CHALLENGE = 'Bearer realm="tempora"';

export interface TokenPair {
  access_token: string;
  refresh_token: string;
  token_type: 'Bearer';
  expires_in: number;
  refresh_expires_in: number;
}

export interface TokenSettings {
  issuer: string;
  audience: string;
  accessTtlSeconds: number;
  refreshTtlDays: number;
  reuseGraceSeconds: number;
}

/** Claims of a gateway access token. */
export interface AccessClaims {
  sub: string;
  iat: number;
  exp: number;
  jti: string;
  tier?: Tier;
  /** `service` on service tokens (sub `service:<name>`). */
  scope?: string;
  iss: string;
  aud: string | string[];
}

const refreshRefused = (detail: string) => unauthorized(detail, 'Bearer realm="tempora", error="invalid_grant"');

/** How a refresh ended: a new pair, a replay within the grace window, a reused token (its sign-in revoked), or refused. */
export type RefreshOutcome = 'rotated' | 'replayed_in_grace' | 'reuse_detected' | 'refused';

/** Signs access tokens and runs the refresh-token lifecycle (rotation, reuse detection, revocation). */
export class TokenService {
  private readonly keys: KeyStore;
  private readonly repository: GatewayRepository;
  readonly settings: TokenSettings;

  /** Told how each refresh ended, for the gateway's metrics. */
  private readonly onRefresh: (outcome: RefreshOutcome) => void;

  constructor(keys: KeyStore, repository: GatewayRepository, settings: TokenSettings, onRefresh: (outcome: RefreshOutcome) => void = () => {}) {
    this.onRefresh = onRefresh;
    this.keys = keys;
    this.repository = repository;
    this.settings = settings;
  }

  async sign(claims: Record<string, unknown>, subject: string, ttlSeconds: number): Promise<{ token: string; jti: string; exp: number }> {
    const { kid, privateKey } = this.keys.signingKey();
    const jti = randomUUID();
    const iat = Math.floor(Date.now() / 1000);
    const exp = iat + ttlSeconds;
    const token = await new SignJWT(claims)
      .setProtectedHeader({ alg: 'ES256', kid, typ: 'JWT' })
      .setSubject(subject)
      .setIssuer(this.settings.issuer)
      .setAudience(this.settings.audience)
      .setIssuedAt(iat)
      .setExpirationTime(exp)
      .setJti(jti)
      .sign(privateKey);
    return { token, jti, exp };
  }

  accessToken(user: Pick<UserRow, 'id' | 'tier'>) {
    return this.sign({ tier: user.tier }, user.id, this.settings.accessTtlSeconds);
  }

  serviceToken(service: string, ttlSeconds: number) {
    return this.sign({ scope: 'service' }, `service:${service}`, ttlSeconds);
  }

  /** A new refresh token in `familyId` (a new family at sign-in). */
  private async refreshToken(userId: string, familyId: string, trx?: Parameters<GatewayRepository['sessions']['insertRefreshToken']>[1]): Promise<string> {
    const token = opaqueSecret(REFRESH_TOKEN_PREFIX);
    const expiresAt = new Date(Date.now() + this.settings.refreshTtlDays * 86_400_000);
    await this.repository.sessions.insertRefreshToken(
      { id: randomUUID(), family_id: familyId, user_id: userId, token_hash: sha256(token), expires_at: expiresAt },
      trx,
    );
    return token;
  }

  private async pair(user: Pick<UserRow, 'id' | 'tier'>, refresh: string): Promise<TokenPair> {
    const access = await this.accessToken(user);
    return {
      access_token: access.token,
      refresh_token: refresh,
      token_type: 'Bearer',
      expires_in: this.settings.accessTtlSeconds,
      refresh_expires_in: this.settings.refreshTtlDays * 86_400,
    };
  }

  /** Sign-in: a new session (refresh-token family). */
  async signIn(user: Pick<UserRow, 'id' | 'tier'>): Promise<TokenPair> {
    return this.pair(user, await this.refreshToken(user.id, randomUUID()));
  }

  /**
   * Rotates a refresh token. A token already rotated is a replay (RFC 9700 §4.14.2): unless it comes
   * within the grace window (two tabs refreshing at once), the whole family is revoked.
   */
  async refresh(presented: string): Promise<TokenPair> {
    const outcome = await this.repository.sessions.withRefreshToken(sha256(presented), async (trx, row) => {
      if (!row) return { error: 'the refresh token is not valid' } as const;
      if (row.revoked_at) return { error: 'the refresh token has been revoked' } as const;
      if (row.expires_at.getTime() <= Date.now()) return { error: 'the refresh token has expired' } as const;
      if (row.rotated_at) {
        const age = Date.now() - row.rotated_at.getTime();
        if (age > this.settings.reuseGraceSeconds * 1000) {
          await this.repository.sessions.revokeFamily(row.family_id, 'reuse', trx);
          return { error: 'the refresh token was already used; every session token of this sign-in has been revoked', reuse: true } as const;
        }
        return { userId: row.user_id, token: await this.refreshToken(row.user_id, row.family_id, trx), grace: true } as const;
      }
      await this.repository.sessions.markRotated(trx, row.id);
      return { userId: row.user_id, token: await this.refreshToken(row.user_id, row.family_id, trx) } as const;
    });
    if ('error' in outcome) {
      this.onRefresh('reuse' in outcome ? 'reuse_detected' : 'refused');
      throw refreshRefused(outcome.error as string);
    }
    this.onRefresh('grace' in outcome ? 'replayed_in_grace' : 'rotated');
    const user = await this.repository.users.findUser(outcome.userId);
    if (!user) throw refreshRefused('the account no longer exists');
    return this.pair(user, outcome.token);
  }

  /** Revokes the session of `refreshToken` (which must be the caller's), or every session of the user. */
  async logout(userId: string, refreshToken: string | undefined, access: { jti: string; exp: number } | undefined): Promise<void> {
    if (refreshToken) {
      await this.repository.sessions.withRefreshToken(sha256(refreshToken), async (trx, row) => {
        if (row && row.user_id === userId) await this.repository.sessions.revokeFamily(row.family_id, 'logout', trx);
      });
    } else {
      await this.repository.sessions.revokeAllSessions(userId, 'logout');
    }
    if (access) await this.repository.sessions.revokeAccessToken(access.jti, new Date(access.exp * 1000));
  }
}
