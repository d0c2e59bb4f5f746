// What an informer keeps of a child object: most of a child is the API server's defaults and other
// managers' fields, which the operator never reads, so with thousands of children the caches would
// mostly hold those. A child is kept as
//   - its metadata (ownership, labels, the spec-hash annotation, resourceVersion), without managedFields;
//   - the fields the operator applied, read from its own managedFields entry: exactly what drift
//     detection compares (a field someone else took over is dropped, which reads as drift, as it is);
//   - the fields reconcilers read although the operator does not set them (workload status, the data
//     the simulation service reports).
import { isRecord, type KubeObject } from './object.ts';

export type ReadPaths = readonly (readonly string[])[];

export function projectChild<T extends KubeObject>(obj: T, manager: string, read: ReadPaths = []): T {
  const { managedFields, ...metadata } = obj.metadata;
  const fields: Record<string, unknown> = { ...obj };
  const out: Record<string, unknown> = { apiVersion: obj.apiVersion, kind: obj.kind, metadata };
  for (const entry of managedFields ?? []) {
    if (entry.manager !== manager || entry.operation !== 'Apply' || entry.subresource || !isRecord(entry.fieldsV1)) continue;
    for (const [key, set] of Object.entries(entry.fieldsV1)) {
      const name = key.startsWith('f:') ? key.slice(2) : undefined;
      if (!name || name === 'metadata' || !(name in fields)) continue;
      out[name] = merge(out[name], project(fields[name], set));
    }
  }
  for (const path of read) copyPath(fields, out, path);
  // A projection keeps some of obj's own fields, each where it was, with metadata and its name: it has T's
  // shape with fewer of its optional fields. Which fields is named at run time (the manager's field set),
  // which the type system cannot follow.
  return out as T;
}

/**
 * The part of `value` that `set` names; a set without sub-fields owns the whole value. `set` is a managedFields
 * `fieldsV1` set (`f:<field>`, `k:<key JSON>`, `v:<value JSON>`, `i:<index>`, `.`), JSON that client-node
 * types `any`: each level is read with isRecord.
 */
export function project(value: unknown, set: unknown): unknown {
  const keys = isRecord(set) ? Object.keys(set).filter((k) => k !== '.') : [];
  if (!isRecord(set) || keys.length === 0 || value === null || typeof value !== 'object') return value;
  if (Array.isArray(value)) {
    return value.flatMap((item, i) => {
      const key = keys.find((k) => matches(item, i, k));
      return key === undefined ? [] : [project(item, set[key])];
    });
  }
  const out: Record<string, unknown> = {};
  for (const key of keys) {
    const name = key.startsWith('f:') ? key.slice(2) : undefined;
    if (name !== undefined && isRecord(value) && name in value) out[name] = project(value[name], set[key]);
  }
  return out;
}

function matches(item: unknown, index: number, key: string): boolean {
  if (key.startsWith('i:')) return Number(key.slice(2)) === index;
  if (key.startsWith('v:')) return JSON.stringify(item) === JSON.stringify(JSON.parse(key.slice(2)));
  if (!key.startsWith('k:') || !isRecord(item)) return false;
  const fields: unknown = JSON.parse(key.slice(2));
  return isRecord(fields) && Object.entries(fields).every(([f, v]) => item[f] === v);
}

/** Two projections of one object (a field applied under two API versions) combined. */
function merge(a: unknown, b: unknown): unknown {
  if (a === undefined) return b;
  if (isRecord(a) && isRecord(b)) {
    const out: Record<string, unknown> = { ...a };
    for (const [k, v] of Object.entries(b)) out[k] = merge(out[k], v);
    return out;
  }
  return b;
}

function copyPath(from: Record<string, unknown>, to: Record<string, unknown>, path: readonly string[]): void {
  let src: unknown = from;
  for (const p of path) {
    if (!isRecord(src)) return;
    src = src[p];
  }
  if (src === undefined) return;
  let dst = to;
  for (const p of path.slice(0, -1)) {
    const next = dst[p];
    if (isRecord(next)) dst = next;
    else {
      const created: Record<string, unknown> = {};
      dst[p] = created;
      dst = created;
    }
  }
  dst[path[path.length - 1]!] = src;
}
