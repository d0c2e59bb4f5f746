/**
 * The Idempotency-Key request header (draft-ietf-httpapi-idempotency-key-header) as every service reads
 * it: the services that start work under a key (the simulation's runs, the generation's jobs) and the
 * gateway, which charges a keyed retry once.
 */
import { z } from 'zod';
import { Problem } from './errors.ts';

const SF_STRING = /^"((?:[\x20\x21\x23-\x5B\x5D-\x7E]|\\["\\])*)"$/;
const PRINTABLE_ASCII = /^[\x20-\x7E]{1,255}$/;

/**
 * The key a header value carries: the draft's quoted sf-string unquoted, or the bare value Stripe's
 * clients send as it is; undefined for a value that opens a quote it does not close properly.
 */
export function idempotencyKeyOf(value: string): string | undefined {
  if (!value.startsWith('"')) return value;
  const quoted = SF_STRING.exec(value);
  return quoted ? quoted[1]!.replace(/\\(["\\])/g, '$1') : undefined;
}

export const IdempotencyKeySchema = z
  .string()
  .transform((value, ctx) => {
    const key = idempotencyKeyOf(value);
    if (key === undefined || !PRINTABLE_ASCII.test(key)) {
      ctx.addIssue({ code: 'custom', message: 'must be 1 to 255 printable ASCII characters, bare or as a quoted string (RFC 8941)' });
      return z.NEVER;
    }
    return key;
  })
  .meta({
    description:
      '1–255 printable ASCII characters, bare or as an RFC 8941 quoted string. A retry with the same key and the same request answers what the key started (marked `Idempotent-Replayed: true`) instead of starting it again; the same key with a different request is 422. Keys are per caller and kept as long as what they started.',
  });

/** The 422 for a key its caller already used with a different request. */
export const idempotencyKeyReused = (detail: string): Problem =>
  new Problem(422, detail, {
    title: 'Idempotency-Key reused',
    type: 'https://tempora.dev/problems/idempotency-key-reused',
    errors: [{ path: 'headers.idempotency-key', message: 'was used with a different request' }],
  });
