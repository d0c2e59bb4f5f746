// Decides whether a server-side apply would change anything, so that a converged cluster sees no writes.
//
// A child needs applying when the desired manifest changed since the last apply (a hash of it is kept in
// an annotation; this also catches fields the operator stopped setting, which a comparison alone cannot
// see) or when a field the operator sets differs on the live object (someone edited it). The comparison
// is a subset check: the API server adds defaults and other managers' fields, which are not drift.
import { createHash } from 'node:crypto';
import { isRecord, type KubeObject } from './object.ts';

export const SPEC_HASH_ANNOTATION = 'tempora.dev/spec-hash';

export function withSpecHash<T extends KubeObject>(obj: T): T {
  const hash = createHash('sha256').update(JSON.stringify(obj)).digest('hex').slice(0, 16);
  return {
    ...obj,
    metadata: { ...obj.metadata, annotations: { ...obj.metadata.annotations, [SPEC_HASH_ANNOTATION]: hash } },
  };
}

export function needsApply(desired: KubeObject, live: KubeObject | undefined): boolean {
  if (!live || live.metadata.deletionTimestamp) return true;
  if (live.metadata.annotations?.[SPEC_HASH_ANNOTATION] !== desired.metadata.annotations?.[SPEC_HASH_ANNOTATION]) return true;
  return !isSubset(desired, live);
}

export function isSubset(desired: unknown, live: unknown): boolean {
  if (desired === undefined || desired === null) return true;
  if (Array.isArray(desired)) {
    if (desired.length === 0) return live === undefined || (Array.isArray(live) && live.length === 0);
    return Array.isArray(live) && live.length === desired.length && desired.every((d, i) => isSubset(d, live[i]));
  }
  if (typeof desired === 'object') {
    const entries = Object.entries(desired);
    if (entries.length === 0) return live === undefined || (typeof live === 'object' && live !== null);
    if (!isRecord(live)) return false;
    return entries.every(([k, v]) => isSubset(v, live[k]));
  }
  if (desired === live) return true;
  // The API server rewrites quantities into canonical form ("0.5" becomes "500m", "1024Mi" becomes "1Gi").
  const a = parseQuantity(desired);
  const b = parseQuantity(live);
  return a !== undefined && a === b;
}

const QUANTITY = /^([+-]?[0-9.]+)(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$/;
const FACTORS: Record<string, number> = {
  m: 1e-3,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  P: 1e15,
  E: 1e18,
  Ki: 2 ** 10,
  Mi: 2 ** 20,
  Gi: 2 ** 30,
  Ti: 2 ** 40,
  Pi: 2 ** 50,
  Ei: 2 ** 60,
};

function parseQuantity(v: unknown): number | undefined {
  if (typeof v === 'number') return v;
  if (typeof v !== 'string') return undefined;
  const m = QUANTITY.exec(v);
  if (!m) return undefined;
  return Number(m[1]) * (m[2] ? FACTORS[m[2]]! : 1);
}
