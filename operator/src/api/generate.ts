// Generates the TypeScript types of the operator's API (api/v1alpha1/zz_generated.types.ts) from the
// CustomResourceDefinitions in crds/, the schemas the API server validates and defaults every custom
// resource with. The CRDs are the source: a field added there appears in the types after
// `node operator/src/api/generate.ts`, and operator/test/api.test.ts fails while the file on disk differs
// from what this generates, so the two cannot drift. (kubebuilder goes the other way, Go types to CRDs
// with controller-gen; TypeScript types carry no validation markers to generate a schema from.)
//
// Rules: a property the schema requires, or gives a default, is required in the type (the API server
// fills defaults in before the operator reads an object); every other property is optional. Status
// properties are all optional. Object schemas at the paths in NAMED become named types, shared between
// kinds when they render identically (a mismatch stops the generator); the others are written inline.
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';

interface Schema {
  type?: string;
  description?: string;
  properties?: Record<string, Schema>;
  required?: string[];
  items?: Schema;
  additionalProperties?: Schema | boolean;
  enum?: unknown[];
  anyOf?: Schema[];
  default?: unknown;
  'x-kubernetes-int-or-string'?: boolean;
  'x-kubernetes-preserve-unknown-fields'?: boolean;
}

interface Crd {
  spec: { names: { kind: string }; versions: { name: string; schema: { openAPIV3Schema: Schema } }[] };
}

const HERE = dirname(fileURLToPath(import.meta.url));
export const CRD_DIR = join(HERE, '..', '..', '..', 'crds');
export const GENERATED_FILE = join(HERE, 'v1alpha1', 'zz_generated.types.ts');
const VERSION = 'v1alpha1';

/** Named object types, by path below the kind (`spec.x`, `[]` for array items); the rest is inlined. */
const NAMED: [RegExp, string][] = [
  [/^spec\.image$/, 'ImageSpec'],
  [/(^|\.)resources$/, 'Resources'],
  [/^spec\.services\.[a-z]+$/, 'ServiceSettings'],
  [/(^|\.)pods$/, 'PodSettings'],
  [/\.pods\.imagePullSecrets\[\]$/, 'LocalObjectReference'],
  [/\.pods\.tolerations\[\]$/, 'Toleration'],
  [/\.pods\.affinity$/, 'Affinity'],
  [/\.pods\.topologySpreadConstraints\[\]$/, 'TopologySpreadConstraint'],
  [/\.labelSelector$/, 'LabelSelector'],
  [/^spec\.monitoring$/, 'MonitoringSpec'],
  [/^spec\.(database|redis)$/, 'SecretKeyRef'],
  [/^spec\.(generation\.)?models$/, 'ModelsSpec'],
  [/\.models\.presets\[\]$/, 'ModelPreset'],
  [/\.models\.policy$/, 'ModelPolicy'],
  [/^spec\.rateLimits\.tiers\[\]$/, 'RateLimitTier'],
  [/^spec\.ingress$/, 'IngressSpec'],
  [/^spec\.tracing$/, 'TracingSpec'],
  [/^status\.conditions\[\]$/, 'Condition'],
  [/^status\.services\[\]$/, 'ServiceStatus'],
];

function doc(lines: string[], indent: string): string {
  const text = lines.filter(Boolean);
  if (text.length === 0) return '';
  if (text.length === 1 && !text[0]!.includes('\n')) return `${indent}/** ${text[0]} */\n`;
  return `${indent}/**\n${text
    .flatMap((l) => l.split('\n'))
    .map((l) => `${indent} * ${l}`.trimEnd())
    .join('\n')}\n${indent} */\n`;
}

class Generator {
  /** Named types: name → rendered body, in the order first met. */
  readonly named = new Map<string, string>();

  type(schema: Schema, path: string, indent: string, defaultsRequire: boolean): string {
    if (schema['x-kubernetes-int-or-string'] || schema.anyOf) return 'number | string';
    if (schema.enum) return schema.enum.map((v) => (typeof v === 'string' ? `'${v}'` : JSON.stringify(v))).join(' | ');
    switch (schema.type) {
      case 'string':
        return 'string';
      case 'integer':
      case 'number':
        return 'number';
      case 'boolean':
        return 'boolean';
      case 'array':
        return `${this.wrap(this.type(schema.items ?? {}, `${path}[]`, indent, defaultsRequire))}[]`;
      case 'object':
        return this.object(schema, path, indent, defaultsRequire);
      default:
        throw new Error(`${path}: no TypeScript type for schema type ${JSON.stringify(schema.type)}`);
    }
  }

  wrap(type: string): string {
    return type.includes(' | ') ? `(${type})` : type;
  }

  object(schema: Schema, path: string, indent: string, defaultsRequire: boolean): string {
    const name = NAMED.find(([pattern]) => pattern.test(path))?.[1];
    const bodyIndent = name ? '' : indent;
    let body: string;
    if (schema.properties) {
      const required = new Set(schema.required ?? []);
      const fields = Object.entries(schema.properties).map(([key, prop]) => {
        const present = required.has(key) || (defaultsRequire && prop.default !== undefined);
        const notes = [prop.description ?? '', prop.default !== undefined ? `Default: ${JSON.stringify(prop.default)}.` : ''];
        const type = this.type(prop, path ? `${path}.${key}` : key, `${bodyIndent}  `, defaultsRequire);
        return `${doc(notes, `${bodyIndent}  `)}${bodyIndent}  ${key}${present ? '' : '?'}: ${type};`;
      });
      body = `{\n${fields.join('\n')}\n${bodyIndent}}`;
    } else if (schema.additionalProperties && typeof schema.additionalProperties === 'object') {
      body = `Record<string, ${this.type(schema.additionalProperties, `${path}.*`, bodyIndent, defaultsRequire)}>`;
    } else {
      body = 'Record<string, unknown>';
    }
    if (!name) return body;
    const known = this.named.get(name);
    if (known !== undefined && known !== body) throw new Error(`${path}: schema differs from the other uses of ${name}; name it apart in NAMED`);
    this.named.set(name, body);
    return name;
  }
}

function readCrds(dir: string): Crd[] {
  return readdirSync(dir)
    .filter((f) => f.endsWith('.yaml'))
    .sort()
    .map((f): Crd => parse(readFileSync(join(dir, f), 'utf8')));
}

/** The generated module's text for the CRDs in `dir`. */
export function generateTypes(dir = CRD_DIR): string {
  const g = new Generator();
  const kinds: string[] = [];
  for (const crd of readCrds(dir)) {
    const kind = crd.spec.names.kind;
    const version = crd.spec.versions.find((v) => v.name === VERSION);
    if (!version) continue;
    const root = version.schema.openAPIV3Schema;
    const spec = root.properties?.spec;
    const status = root.properties?.status;
    if (!spec || !status) throw new Error(`${kind}: the schema needs spec and status`);
    const specType = g.object(spec, 'spec', '', true);
    const statusType = g.object(status, 'status', '', false);
    kinds.push(
      `${doc([spec.description ?? root.description ?? ''], '')}export type ${kind}Spec = ${specType};\n\n` +
        `export type ${kind}Status = ${statusType};\n\n` +
        `${doc([`${/^[AEIOU]/.test(kind) ? 'An' : 'A'} ${kind} as the API server returns it: validated by crds/, defaults filled in.`], '')}` +
        `export interface ${kind} extends KubeObject {\n  spec: ${kind}Spec;\n  status?: ${kind}Status;\n}\n`,
    );
  }
  const named = [...g.named].map(([name, body]) => `export type ${name} = ${body};\n`);
  return [
    `// Code generated by operator/src/api/generate.ts from crds/*.yaml (${VERSION}). DO NOT EDIT.`,
    '// After changing a CRD run `node operator/src/api/generate.ts`; operator/test/api.test.ts fails until then.',
    `import type { KubeObject } from '../../kube/object.ts';`,
    '',
    named.join('\n'),
    kinds.join('\n'),
  ].join('\n');
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  writeFileSync(GENERATED_FILE, generateTypes());
  process.stdout.write(`wrote ${GENERATED_FILE}\n`);
}
