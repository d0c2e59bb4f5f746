import { createHash } from 'node:crypto';
import canonicalize from 'canonicalize';
import { z } from 'zod';
import { toSlug } from './canonical-path.ts';

/**
 * The Temporal Data Format envelope shared by the graph and generation services.
 * `tdf_hash` is SHA-256 (lowercase hex) of the payload serialised with the JSON Canonicalization
 * Scheme (RFC 8785): keys sorted by UTF-16 code units, no insignificant whitespace, numbers in
 * ECMAScript shortest form, strings with the minimal escapes. Any implementation of RFC 8785 reproduces it.
 */
export interface TdfRecord<P = Record<string, unknown>> {
  id: string;
  version: string;
  source: string;
  timestamp: string;
  provenance: Record<string, unknown>;
  payload: P;
  entity_ids: string[];
  tdf_hash: string;
}

/** The TdfRecord as an API answers it, for the OpenAPI documents of both services. */
export const TdfRecordSchema = z
  .object({
    id: z.string(),
    version: z.string(),
    source: z.string(),
    timestamp: z.string(),
    provenance: z.record(z.string(), z.unknown()),
    payload: z.record(z.string(), z.unknown()),
    entity_ids: z.array(z.string()),
    tdf_hash: z.string().regex(/^[0-9a-f]{64}$/),
  })
  .meta({ id: 'TdfRecord', description: 'Temporal Data Format record; tdf_hash is SHA-256 of the RFC 8785 canonical JSON of payload' });

export const TDF_VERSION = '1.0';

export function canonicalJson(value: unknown): string {
  const text = canonicalize(value);
  if (text === undefined) throw new TypeError('value cannot be canonicalised as JSON');
  return text;
}

/** SHA-256 (hex) of a value's RFC 8785 form: the same for values that differ only in key order or spacing. */
export function canonicalHash(value: unknown): string {
  return createHash('sha256').update(canonicalJson(value), 'utf8').digest('hex');
}

export const tdfHash = (payload: unknown): string => canonicalHash(payload);

export function toTdf<P extends Record<string, unknown>>(fields: Omit<TdfRecord<P>, 'tdf_hash' | 'version'>): TdfRecord<P> {
  return { ...fields, version: TDF_VERSION, tdf_hash: tdfHash(fields.payload) };
}

/** Entity ids of TDF records: the same figure or place gets the same id from every service. */
export const figureEntityId = (name: string) => `figure:${toSlug(name)}`;
export const placeEntityId = (country: string, region: string, city: string) => `place:${toSlug(country)}/${toSlug(region)}/${toSlug(city)}`;
