// Credentials generated once, in the cluster, instead of at render time: a Secret labelled
// tempora.dev/generated-secret=true names in its annotation tempora.dev/generate, a JSON object, the keys to
// make and a template for each. The operator fills every such key the Secret does not hold, once, and never
// writes a key that exists. A chart rendered with `helm template` (Argo CD) thus renders the same
// manifest every time, and a later apply of it leaves the filled keys alone: they are absent from the
// manifest, and neither a three-way merge (client-side apply, `helm upgrade`) nor server-side apply removes
// a field the manifest never held.
//
// A template is text with placeholders: `{random:N}`, N letters and digits from a cryptographic source
// (16 ≤ N ≤ 1024), and `{<key>}`, the value of another key of the same Secret, existing or generated in the
// same pass (PostgreSQL's `url` from its `password`).
//
// Only labelled Secrets are watched (a label-selected watch, never every Secret of the cluster), and their
// cache entries keep the key names only: the values are read with a `get` when there is something to fill,
// and dropped.
import { randomInt } from 'node:crypto';
import { FIELD_MANAGER } from '../kube/client.ts';
import { isRecord, type KubeObject, type Secret } from '../kube/object.ts';
import * as R from '../kube/resources.ts';
import type { ReconcileContext, Reconciler } from './context.ts';

export const GENERATED_SECRET_LABEL = 'tempora.dev/generated-secret';
export const GENERATE_ANNOTATION = 'tempora.dev/generate';
/** The informer's selector: the only Secrets this reconciler sees. */
export const GENERATED_SECRET_SELECTOR = `${GENERATED_SECRET_LABEL}=true`;

const RANDOM_MIN = 16;
const RANDOM_MAX = 1024;
const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
/** What the API server takes as a Secret's data key. */
const KEY = /^[-._a-zA-Z0-9]+$/;
const PLACEHOLDER = /\{([^{}]*)\}/g;

/** What a Secret asks to be generated, as its key names show it. */
export interface GenerationPlan {
  /** Keys to fill now, each after the keys its template names. */
  fill: string[];
  /** Why a key cannot be made, one phrase per key (or one for an annotation that does not parse). */
  problems: string[];
}

/** Whether the operator watches the Secret: it carries the label, set to "true". */
export function isGenerated(secret: KubeObject): boolean {
  return secret.metadata.labels?.[GENERATED_SECRET_LABEL] === 'true';
}

/** The annotation's templates by key, or a phrase saying why it is not a JSON object of strings. */
function templatesOf(secret: KubeObject): Map<string, string> | string {
  const raw = secret.metadata.annotations?.[GENERATE_ANNOTATION];
  if (raw === undefined) return new Map();
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    parsed = undefined;
  }
  const refused = `the annotation ${GENERATE_ANNOTATION} is not a JSON object of templates (strings)`;
  if (!isRecord(parsed)) return refused;
  const templates = new Map<string, string>();
  for (const [key, template] of Object.entries(parsed)) {
    if (typeof template !== 'string') return refused;
    templates.set(key, template);
  }
  return templates;
}

type Part = { text: string } | { random: number } | { ref: string };

/** A template split into text and placeholders, or a phrase saying what is wrong with it. */
function parseTemplate(template: string): Part[] | string {
  const parts: Part[] = [];
  let at = 0;
  for (const m of template.matchAll(PLACEHOLDER)) {
    if (m.index > at) parts.push({ text: template.slice(at, m.index) });
    at = m.index + m[0].length;
    const inner = m[1]!;
    const random = /^random:(\d+)$/.exec(inner);
    if (random) {
      const n = Number(random[1]);
      if (n < RANDOM_MIN || n > RANDOM_MAX) return `{${inner}} asks for ${n} characters; from ${RANDOM_MIN} to ${RANDOM_MAX} are made`;
      parts.push({ random: n });
    } else if (KEY.test(inner)) parts.push({ ref: inner });
    else return `{${inner}} is neither {random:N} nor {<key>}`;
  }
  if (at < template.length) parts.push({ text: template.slice(at) });
  return parts;
}

/**
 * What the operator would fill in this Secret, from its key names alone: the keys missing from data that
 * its annotation templates, in an order where each comes after the keys it names, and why the others
 * cannot be made (a bad template, a key that names one the Secret neither holds nor generates, a cycle).
 */
export function planGeneration(secret: Secret): GenerationPlan {
  const templates = templatesOf(secret);
  if (typeof templates === 'string') return { fill: [], problems: [templates] };
  const present = new Set(Object.keys(secret.data ?? {}));
  const problems: string[] = [];
  const needs = new Map<string, string[]>();
  for (const [key, template] of templates) {
    if (present.has(key)) continue;
    const parts = KEY.test(key) ? parseTemplate(template) : `${JSON.stringify(key)} cannot be a Secret's key`;
    if (typeof parts === 'string') problems.push(`${key}: ${parts}`);
    else needs.set(key, [...new Set(parts.flatMap((p) => ('ref' in p ? [p.ref] : [])))]);
  }
  const fill: string[] = [];
  const made = new Set(present);
  for (let progress = true; progress; ) {
    progress = false;
    for (const [key, refs] of needs) {
      if (refs.every((r) => made.has(r))) {
        fill.push(key);
        made.add(key);
        needs.delete(key);
        progress = true;
      }
    }
  }
  for (const [key, refs] of needs) {
    problems.push(`${key}: needs ${refs.filter((r) => !made.has(r)).join(', ')}, which the Secret neither holds nor can generate first`);
  }
  return { fill, problems };
}

/** A random string of letters and digits; randomInt draws without modulo bias. */
export function randomAlphanumeric(length: number): string {
  let s = '';
  for (let i = 0; i < length; i++) s += ALPHABET[randomInt(ALPHABET.length)];
  return s;
}

/**
 * The values of `plan.fill`, base64-encoded as a Secret's data, from the Secret's current data. The plan is
 * this Secret's (planGeneration): a key it cannot template, which such a plan never fills, is skipped.
 */
export function generateValues(secret: Secret, plan: GenerationPlan, random = randomAlphanumeric): Record<string, string> {
  const templates = templatesOf(secret);
  const data = secret.data ?? {};
  const values = new Map(Object.entries(data).map(([k, v]) => [k, Buffer.from(v, 'base64').toString('utf8')]));
  const filled: Record<string, string> = {};
  for (const key of plan.fill) {
    const template = typeof templates === 'string' ? undefined : templates.get(key);
    const parts = template === undefined ? template : parseTemplate(template);
    if (parts === undefined || typeof parts === 'string') continue;
    const value = parts.map((p) => ('text' in p ? p.text : 'random' in p ? random(p.random) : values.get(p.ref)!)).join('');
    values.set(key, value);
    filled[key] = Buffer.from(value, 'utf8').toString('base64');
  }
  return filled;
}

/**
 * The informer's cache entry: the Secret with the names of its keys but not their values, so that the
 * credentials it generates do not stay in the operator's memory.
 */
export function keyNamesOnly(secret: Secret): Secret {
  const { managedFields: _managedFields, ...metadata } = secret.metadata;
  const data = secret.data ?? {};
  return { ...secret, metadata, data: Object.fromEntries(Object.keys(data).map((k) => [k, ''])) };
}

/** Fills the keys labelled Secrets ask for; reports once per version of a Secret what it cannot fill. */
export class GeneratedSecrets implements Reconciler<Secret> {
  readonly resource = R.Secret;
  /** The resourceVersion each Secret (by uid) was last warned about, so that a resync does not repeat the Event. */
  readonly #warned = new Map<string, string | undefined>();

  /** Of the context only the client, the log and the Events. */
  async reconcile(cached: Secret, ctx: Pick<ReconcileContext, 'client' | 'log' | 'events'>): Promise<void> {
    const cachedPlan = planGeneration(cached);
    const uid = cached.metadata.uid ?? '';
    // Nothing to fill, and what cannot be made was told for this version already.
    if (cachedPlan.fill.length === 0 && (cachedPlan.problems.length === 0 || this.#warned.get(uid) === cached.metadata.resourceVersion)) return;
    // The values, and the version the write is conditional on, from the API server rather than the cache.
    const secret = await ctx.client.getOrUndefined(R.Secret, cached.metadata.namespace ?? '', cached.metadata.name);
    if (!secret) return;
    const name = `${secret.metadata.namespace}/${secret.metadata.name}`;
    const plan = planGeneration(secret);
    const problems = [...plan.problems];
    let version = secret.metadata.resourceVersion;
    if (plan.fill.length > 0 && secret.immutable === true) problems.push(`${plan.fill.join(', ')}: the Secret is immutable`);
    else if (plan.fill.length > 0) {
      // Conditional on the version read: a key someone else wrote meanwhile makes this a conflict, retried
      // from the new version, so an existing key is never replaced.
      const written = await ctx.client.request<Secret>('PATCH', R.objectPath(R.Secret, secret.metadata.namespace ?? '', secret.metadata.name), {
        body: { metadata: { resourceVersion: version }, data: generateValues(secret, plan) },
        contentType: 'application/merge-patch+json',
        query: { fieldManager: FIELD_MANAGER },
      });
      version = written.metadata.resourceVersion;
      ctx.log.info({ secret: name, keys: plan.fill }, 'generated Secret keys');
      await ctx.events.record(secret, 'Normal', 'Generated', `generated ${plan.fill.join(', ')}`);
    }
    if (problems.length === 0 || this.#warned.get(uid) === version) return;
    this.#warned.set(uid, version);
    ctx.log.warn({ secret: name, problems }, 'cannot generate Secret keys');
    await ctx.events.record(secret, 'Warning', 'GenerationFailed', `cannot generate ${problems.join('; ')}`);
  }

  /** A Secret deleted: nothing more to remember about it. */
  forget(uid: string | undefined): void {
    this.#warned.delete(uid ?? '');
  }
}
