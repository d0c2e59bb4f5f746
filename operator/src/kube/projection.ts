// What an informer keeps of a child object: most of a child is the API server's defaults and other
// managers' fields, which the operator never reads, so with thousands of children the caches would
// mostly hold those. A child is kept as
//   - its metadata (ownership, labels, the spec-hash annotation, resourceVersion), without managedFields;
//   - the fields the operator applied, read from its own managedFields entry: exactly what drift
//     detection compares (a field someone else took over is dropped, which reads as drift, as it is);
//   - the fields reconcilers read although the operator does not set them (workload status, the data
//     the simulation service reports).
import type { KubeObject } from './object.ts';

/** A managedFields `fieldsV1` set: `f:<field>`, `k:<key JSON>`, `v:<value JSON>`, `i:<index>`, `.`. */
export interface FieldSet {
  [key: string]: FieldSet;
}

interface ManagedFieldsEntry {
  manager?: string;
  operation?: string;
  subresource?: string;
  fieldsV1?: FieldSet;
}

export type ReadPaths = readonly (readonly string[])[];

export function projectChild(obj: KubeObject, manager: string, read: ReadPaths = []): KubeObject {
  const { managedFields, ...metadata } = obj.metadata;
  const out: KubeObject = { apiVersion: obj.apiVersion, kind: obj.kind, metadata };
  for (const entry of (managedFields ?? []) as ManagedFieldsEntry[]) {
    if (entry.manager !== manager || entry.operation !== 'Apply' || entry.subresource || !entry.fieldsV1) continue;
    for (const [key, set] of Object.entries(entry.fieldsV1)) {
      const name = key.startsWith('f:') ? key.slice(2) : undefined;
      if (!name || name === 'metadata' || !(name in obj)) continue;
      out[name] = merge(out[name], project(obj[name], set));
    }
  }
  for (const path of read) copyPath(obj, out, path);
  return out;
}

/** The part of `value` that `set` names; a set without sub-fields owns the whole value. */
export function project(value: unknown, set: FieldSet): unknown {
  const keys = Object.keys(set).filter((k) => k !== '.');
  if (keys.length === 0 || value === null || typeof value !== 'object') return value;
  if (Array.isArray(value)) {
    return value.flatMap((item, i) => {
      const key = keys.find((k) => matches(item, i, k));
      return key === undefined ? [] : [project(item, set[key]!)];
    });
  }
  const out: Record<string, unknown> = {};
  for (const key of keys) {
    const name = key.startsWith('f:') ? key.slice(2) : undefined;
    if (name !== undefined && name in (value as Record<string, unknown>)) out[name] = project((value as Record<string, unknown>)[name], set[key]!);
  }
  return out;
}

function matches(item: unknown, index: number, key: string): boolean {
  if (key.startsWith('i:')) return Number(key.slice(2)) === index;
  if (key.startsWith('v:')) return JSON.stringify(item) === JSON.stringify(JSON.parse(key.slice(2)));
  if (!key.startsWith('k:') || item === null || typeof item !== 'object') return false;
  const fields = JSON.parse(key.slice(2)) as Record<string, unknown>;
  return Object.entries(fields).every(([f, v]) => (item as Record<string, unknown>)[f] === v);
}

/** Two projections of one object (a field applied under two API versions) combined. */
function merge(a: unknown, b: unknown): unknown {
  if (a === undefined) return b;
  if (a && b && typeof a === 'object' && typeof b === 'object' && !Array.isArray(a) && !Array.isArray(b)) {
    const out: Record<string, unknown> = { ...(a as Record<string, unknown>) };
    for (const [k, v] of Object.entries(b as Record<string, unknown>)) out[k] = merge(out[k], v);
    return out;
  }
  return b;
}

function copyPath(from: Record<string, unknown>, to: Record<string, unknown>, path: readonly string[]): void {
  let src: unknown = from;
  for (const p of path) {
    if (src === null || typeof src !== 'object') return;
    src = (src as Record<string, unknown>)[p];
  }
  if (src === undefined) return;
  let dst = to;
  for (const p of path.slice(0, -1)) {
    const next = dst[p];
    dst = (next && typeof next === 'object' ? next : (dst[p] = {})) as Record<string, unknown>;
  }
  dst[path[path.length - 1]!] = src;
}
