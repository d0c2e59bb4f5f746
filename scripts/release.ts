/**
 * `npm run release -- --registry R --version V`: publishes the platform. Builds every image from its
 * shipped Dockerfile with BuildKit and pushes it to `R/<image>:V`, then pushes both charts to
 * `oci://R/charts` as version V, their values naming the images by V and by the digests just pushed, so a
 * chart installs exactly the images released with it (docs/release.md).
 *
 * BuildKit is reached through `buildctl` when BUILDKIT_HOST is set (a buildkitd of your own, as the tests
 * run), else through `docker buildx`. Registry credentials are the ones both already use
 * (`docker login`, `helm registry login`). `--base-image` (or TEMPORA_BASE_IMAGE) builds on another Node 22
 * image than the Dockerfiles' `node:22-slim`: a mirror's, or a local OCI layout (scripts/base-image.ts). Prints each step on stderr and the release (images and charts
 * with their digests) as JSON on stdout.
 */
import { spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { parseDocument } from 'yaml';
import { z } from 'zod';
import { DEPLOYED_SERVICES } from '../operator/src/reconcilers/platform-services.ts';
import { buildctlBaseArgs, buildxBaseArgs } from './base-image.ts';

const root = join(import.meta.dirname, '..');

/** Helm needs SemVer 2 for a chart's version, and the same string is each image's tag (which refuses `+`). */
const SEMVER = /^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?$/;

const Options = z.object({
  registry: z
    .string()
    .regex(/^[^\s:@/]+(:[0-9]+)?(\/[a-z0-9]+([._-][a-z0-9]+)*)*$/, 'a registry host with an optional path, e.g. ghcr.io/tempora or localhost:5001/tempora'),
  version: z.string().regex(SEMVER, 'a SemVer version without build metadata, e.g. 0.2.0 or 0.2.0-rc.1'),
  builder: z.enum(['buildctl', 'docker']).default(process.env.BUILDKIT_HOST ? 'buildctl' : 'docker'),
  'base-image': z
    .string()
    .min(1)
    .optional()
    .transform((b) => b ?? (process.env.TEMPORA_BASE_IMAGE || undefined)),
  platform: z.string().min(1).optional(),
  'plain-http': z.boolean().default(false),
});
type Options = z.infer<typeof Options>;

const IMAGES = [
  ...DEPLOYED_SERVICES.map((name) => ({ name, dockerfile: `services/${name}/Dockerfile` })),
  { name: 'operator', dockerfile: 'operator/Dockerfile' },
];

interface Released {
  images: Record<string, { reference: string; digest: string }>;
  charts: Record<string, { reference: string; version: string; digest: string }>;
}

const say = (line: string) => process.stderr.write(`[release] ${line}\n`);

/** A step that has not ended in this long is stuck (a push waiting on a registry that never answers), not slow. */
const STEP_TIMEOUT_MS = 30 * 60_000;

function run(command: string, args: string[]): string {
  const result = spawnSync(command, args, {
    cwd: root,
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
    maxBuffer: 256 * 1024 * 1024,
    timeout: STEP_TIMEOUT_MS,
  });
  if (result.error && (result.error as NodeJS.ErrnoException).code === 'ETIMEDOUT')
    throw new Error(`${command} ${args.slice(0, 2).join(' ')} did not end within ${STEP_TIMEOUT_MS / 60_000} minutes:\n${(result.stderr || '').slice(-4000)}`);
  if (result.error) throw new Error(`${command} could not run (${result.error.message}); is it installed and on PATH?`);
  if (result.status !== 0) throw new Error(`${command} ${args.join(' ')} failed (exit ${result.status}):\n${(result.stderr || result.stdout).slice(-4000)}`);
  return `${result.stdout}\n${result.stderr}`;
}

/** Builds one Dockerfile and pushes it; returns the pushed manifest's (or index's) digest. */
function buildAndPush(options: Options, image: { name: string; dockerfile: string }, reference: string, work: string): string {
  const metadata = join(work, `${image.name}.metadata.json`);
  const base = options['base-image'];
  if (options.builder === 'buildctl') {
    // A plain-HTTP registry is buildkitd's own setting (`[registry."host"] http = true` in buildkitd.toml),
    // as Docker's daemon has insecure-registries: the output's registry.insecure would try HTTPS first.
    const output = ['type=image', `name=${reference}`, 'push=true'];
    run('buildctl', [
      'build',
      '--progress=plain',
      '--frontend=dockerfile.v0',
      '--local=context=.',
      `--local=dockerfile=${dirname(join(root, image.dockerfile))}`,
      ...(base ? buildctlBaseArgs(base) : []),
      ...(options.platform ? [`--opt=platform=${options.platform}`] : []),
      `--output=${output.join(',')}`,
      `--metadata-file=${metadata}`,
    ]);
  } else {
    run('docker', [
      'buildx',
      'build',
      `--file=${image.dockerfile}`,
      `--tag=${reference}`,
      '--push',
      `--metadata-file=${metadata}`,
      ...(base ? buildxBaseArgs(base) : []),
      ...(options.platform ? [`--platform=${options.platform}`] : []),
      '.',
    ]);
  }
  const digest = z.object({ 'containerimage.digest': z.string().regex(/^sha256:[a-f0-9]{64}$/) }).parse(JSON.parse(readFileSync(metadata, 'utf8')));
  return digest['containerimage.digest'];
}

/** Sets YAML keys in place, keeping the file's comments (they are the values' documentation). */
function editYaml(file: string, edits: [path: string[], value: unknown][]): void {
  const document = parseDocument(readFileSync(file, 'utf8'));
  for (const [path, value] of edits) document.setIn(path, value);
  writeFileSync(file, document.toString({ lineWidth: 0 }));
}

/** Copies a chart (following its links: the operator chart's CRDs), sets its versions and values, packages and pushes it. */
function publishChart(options: Options, chart: string, values: [string[], unknown][], work: string): { reference: string; digest: string } {
  const dir = join(work, 'charts', chart);
  cpSync(join(root, 'charts', chart), dir, { recursive: true, dereference: true });
  editYaml(join(dir, 'Chart.yaml'), [
    [['version'], options.version],
    [['appVersion'], options.version],
  ]);
  editYaml(join(dir, 'values.yaml'), values);
  run('helm', ['lint', '--strict', dir]);
  run('helm', ['package', dir, '--destination', work]);
  const pushed = run('helm', [
    'push',
    join(work, `${chart}-${options.version}.tgz`),
    `oci://${options.registry}/charts`,
    ...(options['plain-http'] ? ['--plain-http'] : []),
  ]);
  const digest = pushed.match(/^Digest: (sha256:[a-f0-9]{64})$/m)?.[1];
  if (!digest) throw new Error(`helm push of ${chart} printed no digest:\n${pushed}`);
  return { reference: `oci://${options.registry}/charts/${chart}`, digest };
}

function release(options: Options): Released {
  const work = mkdtempSync(join(tmpdir(), 'tempora-release-'));
  try {
    const released: Released = { images: {}, charts: {} };
    for (const image of IMAGES) {
      const reference = `${options.registry}/${image.name}:${options.version}`;
      const started = Date.now();
      say(`building and pushing ${reference} (${image.dockerfile}) with ${options.builder}`);
      const digest = buildAndPush(options, image, reference, work);
      released.images[image.name] = { reference, digest };
      say(`pushed ${reference}@${digest} in ${((Date.now() - started) / 1000).toFixed(1)} s`);
    }
    const digestOf = (name: string) => released.images[name]!.digest;
    const charts: [string, [string[], unknown][]][] = [
      [
        'tempora-operator',
        [
          [['image', 'repository'], `${options.registry}/operator`],
          [['image', 'tag'], options.version],
          [['image', 'digest'], digestOf('operator')],
        ],
      ],
      [
        'tempora',
        [
          [['image', 'registry'], options.registry],
          [['image', 'version'], options.version],
          [['image', 'digests'], Object.fromEntries(DEPLOYED_SERVICES.map((s) => [s, digestOf(s)]))],
        ],
      ],
    ];
    for (const [chart, values] of charts) {
      const pushed = publishChart(options, chart, values, work);
      released.charts[chart] = { ...pushed, version: options.version };
      say(`pushed ${pushed.reference}:${options.version}@${pushed.digest}`);
    }
    return released;
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { values } = parseArgs({
    options: {
      registry: { type: 'string' },
      version: { type: 'string' },
      builder: { type: 'string' },
      'base-image': { type: 'string' },
      platform: { type: 'string' },
      'plain-http': { type: 'boolean' },
    },
    strict: true,
  });
  const parsed = Options.safeParse(values);
  if (!parsed.success) {
    process.stderr.write(
      `usage: npm run release -- --registry <host[/path]> --version <semver> [--builder buildctl|docker] [--base-image <image>] [--platform <list>] [--plain-http]\n${z.prettifyError(parsed.error)}\n`,
    );
    process.exit(2);
  }
  try {
    process.stdout.write(`${JSON.stringify(release(parsed.data), null, 2)}\n`);
  } catch (error) {
    process.stderr.write(`[release] ${(error as Error).message}\n`);
    process.exit(1);
  }
}
