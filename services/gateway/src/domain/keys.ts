import { createHash, createPrivateKey, createPublicKey, generateKeyPairSync, type KeyObject } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { z } from 'zod';

/** A public key as published in the JWK Set. */
export interface PublicJwk {
  kty: 'EC';
  crv: 'P-256';
  x: string;
  y: string;
  kid: string;
  alg: 'ES256';
  use: 'sig';
}

/** An EC P-256 public key as a JWK: the only kind of key the gateway signs with or publishes. */
const EcJwkSchema = z.looseObject({ kty: z.literal('EC'), crv: z.literal('P-256'), x: z.string().min(1), y: z.string().min(1) });
const PrivateEcJwkSchema = EcJwkSchema.extend({ d: z.string().min(1) });

/** JWT_PREVIOUS_KEYS: public keys still published after an operator replaced JWT_PRIVATE_KEY. */
export const JwkSetSchema = z.object({ keys: z.array(EcJwkSchema) });
type JwkSet = z.infer<typeof JwkSetSchema>;

/** The file generated keys are kept in, read back at start-up: it may be damaged or another program's. */
const StoredKeysSchema = z.object({
  keys: z.array(
    z.object({
      kid: z.string(),
      private_jwk: PrivateEcJwkSchema,
      created_at: z.number(),
      /** When it stopped signing; published until every token it signed has expired. */
      retired_at: z.number().nullable(),
    }),
  ),
});
type StoredKey = z.infer<typeof StoredKeysSchema>['keys'][number];

/** `text` as `schema` says, else an error that names `what` and the first mismatch. */
function parsedJson<S extends z.ZodType>(schema: S, text: string, what: string): z.output<S> {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    throw new Error(`${what} is not JSON`);
  }
  const parsed = schema.safeParse(json);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0]!;
  throw new Error(`${what} is not what the gateway wrote or expects: ${issue.path.join('.') || '(value)'}: ${issue.message}`);
}

interface LoadedKey {
  kid: string;
  privateKey: KeyObject | undefined;
  publicKey: KeyObject;
  jwk: PublicJwk;
  createdAt: number;
  retiredAt: number | null;
}

/** RFC 7638 thumbprint of a P-256 public key: the key id. */
export function thumbprint(jwk: { crv?: string; kty?: string; x?: string; y?: string }): string {
  const canonical = JSON.stringify({ crv: jwk.crv, kty: jwk.kty, x: jwk.x, y: jwk.y });
  return createHash('sha256').update(canonical).digest('base64url');
}

function load(privateOrPublic: KeyObject, createdAt: number, retiredAt: number | null): LoadedKey {
  const publicKey = privateOrPublic.type === 'private' ? createPublicKey(privateOrPublic) : privateOrPublic;
  const exported = publicKey.export({ format: 'jwk' }) as { kty: string; crv: string; x: string; y: string };
  if (exported.kty !== 'EC' || exported.crv !== 'P-256') throw new Error('signing keys must be EC P-256 (ES256)');
  const kid = thumbprint(exported);
  return {
    kid,
    privateKey: privateOrPublic.type === 'private' ? privateOrPublic : undefined,
    publicKey,
    jwk: { kty: 'EC', crv: 'P-256', x: exported.x, y: exported.y, kid, alg: 'ES256', use: 'sig' },
    createdAt,
    retiredAt,
  };
}

function parsePrivateKey(text: string): KeyObject {
  const trimmed = text.trim();
  if (trimmed.startsWith('{')) return createPrivateKey({ key: parsedJson(PrivateEcJwkSchema, trimmed, 'JWT_PRIVATE_KEY (a JWK)'), format: 'jwk' });
  return createPrivateKey(trimmed.replace(/\\n/g, '\n'));
}

export interface KeyStoreOptions {
  /** PEM or JWK from JWT_PRIVATE_KEY; when set, nothing is generated or written. */
  configuredKey?: string | undefined;
  /** A JWK Set of public keys still to publish (an operator's previous key). */
  previousKeys?: JwkSet | undefined;
  /** File holding generated keys (TEMPORA_DATA_DIR/gateway-keys/signing-keys.json). */
  file: string;
  rotationMs: number;
  /** How long a retired key stays published: the longest lifetime of a token it signed. */
  retainMs: number;
  now?: () => number;
}

/**
 * The gateway's ES256 signing keys. One key signs; retired keys stay in the JWK Set until the last token
 * they signed has expired, so rotation never invalidates a live token.
 */
export class KeyStore {
  private keys: LoadedKey[] = [];
  private readonly options: KeyStoreOptions;
  private readonly now: () => number;
  private readonly managed: boolean;

  constructor(options: KeyStoreOptions) {
    this.options = options;
    this.now = options.now ?? Date.now;
    this.managed = !options.configuredKey;
    if (options.configuredKey) {
      this.keys.push(load(parsePrivateKey(options.configuredKey), this.now(), null));
    } else if (existsSync(options.file)) {
      const stored = parsedJson(StoredKeysSchema, readFileSync(options.file, 'utf8'), options.file);
      this.keys = stored.keys.map((key) => load(createPrivateKey({ key: key.private_jwk, format: 'jwk' }), key.created_at, key.retired_at));
    }
    if (options.previousKeys) {
      for (const jwk of options.previousKeys.keys) {
        const key = load(createPublicKey({ key: jwk, format: 'jwk' }), 0, this.now());
        if (!this.keys.some((k) => k.kid === key.kid)) this.keys.push({ ...key, retiredAt: Number.MAX_SAFE_INTEGER - options.retainMs });
      }
    }
    if (!this.keys.some((key) => key.retiredAt === null && key.privateKey)) this.rotate();
  }

  /** Generates a new signing key and retires the current one (file-managed keys are persisted). */
  rotate(): string {
    const now = this.now();
    for (const key of this.keys) if (key.retiredAt === null) key.retiredAt = now;
    const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const key = load(privateKey, now, null);
    this.keys.push(key);
    this.prune();
    if (this.managed) this.persist();
    return key.kid;
  }

  private prune(): void {
    const now = this.now();
    this.keys = this.keys.filter((key) => key.retiredAt === null || key.retiredAt + this.options.retainMs > now);
  }

  private persist(): void {
    const stored: StoredKey[] = this.keys
      .filter((key) => key.privateKey)
      .map((key) => ({
        kid: key.kid,
        private_jwk: PrivateEcJwkSchema.parse(key.privateKey!.export({ format: 'jwk' })),
        created_at: key.createdAt,
        retired_at: key.retiredAt,
      }));
    mkdirSync(dirname(this.options.file), { recursive: true });
    const temporary = `${this.options.file}.${process.pid}.tmp`;
    writeFileSync(temporary, JSON.stringify({ keys: stored }, null, 2), { mode: 0o600 });
    renameSync(temporary, this.options.file);
  }

  /** The key that signs now, rotating first when a generated key has reached its age. */
  signingKey(): { kid: string; privateKey: KeyObject } {
    let current = this.keys.find((key) => key.retiredAt === null)!;
    if (this.managed && current.createdAt + this.options.rotationMs <= this.now()) {
      this.rotate();
      current = this.keys.find((key) => key.retiredAt === null)!;
    }
    return { kid: current.kid, privateKey: current.privateKey! };
  }

  /** A published key by id (undefined once retired past its retention). */
  publicKey(kid: string | undefined): KeyObject | undefined {
    if (!kid) return undefined;
    this.prune();
    return this.keys.find((key) => key.kid === kid)?.publicKey;
  }

  jwks(): { keys: PublicJwk[] } {
    this.prune();
    return { keys: this.keys.map((key) => key.jwk) };
  }
}
