// What the charts' tests share: a real helm v3 (built once from the Go module proxy by build-helm.sh and
// cached per version) run with a configuration home of its own, and readers of what it renders.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments } from 'yaml';
import type { KubeObject } from '../../operator/src/kube/object.ts';
import { K8S_VERSION } from '../k8s/control-plane.ts';

const HERE = dirname(fileURLToPath(import.meta.url));

export interface Run {
  status: number | null;
  stdout: string;
  stderr: string;
}

/** A helm CLI whose repositories, plugins, registry logins and cache live in a temporary home, never the user's. */
export class Helm {
  readonly binary: string;
  readonly home: string;
  /** Extra environment for every run (KUBECONFIG for commands that talk to a cluster). */
  env: NodeJS.ProcessEnv = {};

  private constructor(binary: string) {
    this.binary = binary;
    this.home = mkdtempSync(join(tmpdir(), 'tempora-helm-'));
  }

  /** Builds helm when the cache lacks it (about 5 minutes on 2 cores, once per machine). */
  static build(): Helm {
    const built = spawnSync('bash', [join(HERE, 'build-helm.sh')], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
    if (built.status !== 0) throw new Error(`building helm failed (exit ${built.status})`);
    const helm = new Helm(built.stdout.trim().split('\n').pop()!);
    assert.match(helm.ok('version', '--short'), /^v3\./);
    return helm;
  }

  run(...args: string[]): Run {
    const r = spawnSync(this.binary, args, {
      encoding: 'utf8',
      maxBuffer: 64 * 1024 * 1024,
      env: {
        ...process.env,
        ...this.env,
        HELM_CACHE_HOME: join(this.home, 'cache'),
        HELM_CONFIG_HOME: join(this.home, 'config'),
        HELM_DATA_HOME: join(this.home, 'data'),
      },
    });
    return { status: r.status, stdout: r.stdout, stderr: r.stderr };
  }

  ok(...args: string[]): string {
    const r = this.run(...args);
    assert.equal(r.status, 0, `helm ${args.join(' ')} failed:\n${r.stderr}${r.stdout}`);
    return r.stdout;
  }

  /** `helm template` of a chart for the test control plane's Kubernetes version, parsed into objects. */
  template(release: string, chart: string, namespace: string, ...extra: string[]): KubeObject[] {
    return parseObjects(this.ok('template', release, chart, '--namespace', namespace, '--kube-version', K8S_VERSION, ...extra));
  }

  dispose(): void {
    rmSync(this.home, { recursive: true, force: true });
  }
}

export function parseObjects(text: string): KubeObject[] {
  return parseAllDocuments(text)
    .map((d) => d.toJS() as KubeObject | null)
    .filter((d): d is KubeObject => d !== null);
}

export function only<T extends KubeObject = KubeObject>(objects: KubeObject[], kind: string, name?: string): T {
  const found = objects.filter((o) => o.kind === kind && (name === undefined || o.metadata.name === name));
  assert.equal(found.length, 1, `expected one ${kind}${name ? ` ${name}` : ''}, found ${found.length}`);
  return found[0] as T;
}

export interface SchemaNode {
  properties?: Record<string, SchemaNode>;
  $ref?: string;
  definitions?: Record<string, SchemaNode>;
}

/** A schema node with its `$ref` (to `#/definitions/…`) followed. */
function resolve(node: SchemaNode, root: SchemaNode): SchemaNode {
  return node.$ref ? resolve(root.definitions![node.$ref.replace('#/definitions/', '')]!, root) : node;
}

/**
 * Every value of a values file by its dotted path, descending where the schema lists properties (so
 * `image.tag`, but `resources` and `nodeSelector` as a whole). Fails on a key the schema does not describe.
 */
export function keyPaths(v: unknown, schema: SchemaNode, node: SchemaNode = schema, prefix = ''): string[] {
  const here = resolve(node, schema);
  if (v === null || typeof v !== 'object' || Array.isArray(v) || !here.properties) return [prefix];
  return Object.entries(v as Record<string, unknown>).flatMap(([k, x]) => {
    const child = here.properties![k];
    assert.ok(child, `values.schema.json does not describe ${prefix ? `${prefix}.` : ''}${k}`);
    return keyPaths(x, schema, child, prefix ? `${prefix}.${k}` : k);
  });
}

/** Every path the schema describes (the leaves, and objects without listed properties). */
export function schemaPaths(schema: SchemaNode, node: SchemaNode = schema, prefix = ''): string[] {
  const here = resolve(node, schema);
  if (!here.properties) return [prefix];
  return Object.entries(here.properties).flatMap(([k, child]) => schemaPaths(schema, child, prefix ? `${prefix}.${k}` : k));
}

export function lookup(v: unknown, path: string): unknown {
  return path.split('.').reduce<unknown>((o, k) => (o !== null && typeof o === 'object' ? (o as Record<string, unknown>)[k] : undefined), v);
}
