import { createHash, timingSafeEqual } from 'node:crypto';
import type { Context } from 'koa';
import { unauthorized } from './errors.ts';

/** Who made a request, as far as a service can tell from its own credentials. */
export interface Principal {
  kind: 'service' | 'admin' | 'writer' | 'user';
  /** Stable, non-secret identifier used for rate-limit keys and logs. */
  id: string;
}

/**
 * Reads one kind of credential from a request. Returns undefined when the request does not carry it,
 * a principal when it is valid, and throws 401 when it is present but wrong.
 */
export interface Authenticator {
  /** OpenAPI security scheme name. */
  scheme: string;
  /** Value of WWW-Authenticate for this scheme. */
  challenge: string;
  authenticate(ctx: Context): Principal | undefined;
}

const digest = (value: string) => createHash('sha256').update(value).digest();

/** Constant-time membership: compares SHA-256 digests so neither length nor content leaks through timing. */
export function matchSecret(presented: string, accepted: readonly string[]): number {
  const candidate = digest(presented);
  let found = -1;
  accepted.forEach((secret, index) => {
    if (timingSafeEqual(candidate, digest(secret)) && found < 0) found = index;
  });
  return found;
}

const fingerprint = (secret: string) => digest(secret).toString('hex').slice(0, 12);

function headerAuthenticator(scheme: string, header: string, kind: 'service' | 'admin', accepted: readonly string[]): Authenticator {
  const challenge = `ApiKey header="${header}"`;
  return {
    scheme,
    challenge,
    authenticate(ctx) {
      const presented = ctx.get(header);
      if (!presented) return undefined;
      const index = matchSecret(presented, accepted);
      if (index < 0) throw unauthorized(`the ${header} header does not hold a valid key`, challenge);
      return { kind, id: `${kind}:${fingerprint(accepted[index] as string)}` };
    },
  };
}

/** X-Service-Key against SERVICE_KEY; with none configured every presented key is refused. */
export const serviceKeyAuth = (keys: readonly string[]) => headerAuthenticator('ServiceKey', 'X-Service-Key', 'service', keys);

/** X-Admin-Key against ADMIN_KEY. */
export const adminKeyAuth = (key: string | undefined) => headerAuthenticator('AdminKey', 'X-Admin-Key', 'admin', key ? [key] : []);

export interface WriterToken {
  name: string;
  token: string;
}

/** Parses WRITER_TOKENS (`name:token,name:token`); a malformed entry is a configuration error. */
export function parseWriterTokens(entries: readonly string[]): WriterToken[] {
  return entries.map((entry) => {
    const separator = entry.indexOf(':');
    const name = entry.slice(0, separator).trim();
    const token = entry.slice(separator + 1).trim();
    if (separator <= 0 || !name || token.length < 8) {
      throw new Error(`WRITER_TOKENS entry "${name || entry.slice(0, 8)}…" must be name:token with a token of at least 8 characters`);
    }
    return { name, token };
  });
}

/** Writer tokens are presented as `Authorization: Bearer <token>`. */
export function writerTokenAuth(writers: readonly WriterToken[]): Authenticator {
  const challenge = 'Bearer realm="graph-writers"';
  const tokens = writers.map((writer) => writer.token);
  return {
    scheme: 'WriterToken',
    challenge,
    authenticate(ctx) {
      const header = ctx.get('Authorization');
      if (!header) return undefined;
      const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
      if (!match?.[1]) throw unauthorized('Authorization must be "Bearer <token>"', challenge);
      const index = matchSecret(match[1], tokens);
      if (index < 0) throw unauthorized('the bearer token is not a valid writer token', challenge);
      return { kind: 'writer', id: `writer:${(writers[index] as WriterToken).name}` };
    },
  };
}
