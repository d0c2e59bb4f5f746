import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pythonTool } from '../support/python.ts';

/** The newest Schemathesis that installs on the python3 (3.11) we test with; a bump is a deliberate change. */
export const SCHEMATHESIS = 'schemathesis==4.32.5';

/** The checks the suite holds every operation to: no 5xx, and every response as its own OpenAPI document says. */
export const CHECKS = ['not_a_server_error', 'response_schema_conformance'];

/** Credentials by OpenAPI security scheme name (the kit's: ServiceKey, AdminKey, WriterToken, BearerJWT, ApiKey, UserId). */
export type SchemeCredentials = Partial<Record<'ServiceKey' | 'AdminKey' | 'WriterToken' | 'BearerJWT' | 'ApiKey' | 'UserId', string>>;

export interface RunOptions {
  /** A name for messages. */
  name: string;
  /** The service's base URL; its document is `${url}/openapi.json`. */
  url: string;
  credentials: SchemeCredentials;
  /** Headers sent with every request (e.g. the service key X-User-ID is believed beside). */
  headers?: Record<string, string>;
  /** Only these operationIds, or all but these. */
  include?: string[];
  exclude?: string[];
  /** Phases to run (default all; a run of one operation has no links to follow, so no stateful phase). */
  phases?: ('examples' | 'coverage' | 'fuzzing' | 'stateful')[];
  /** Test cases per operation and phase (Schemathesis' --max-examples). */
  examples: number;
  seed: number;
  workers?: number;
}

export interface OperationResult {
  /** `METHOD /path`. */
  operation: string;
  /** Each failure as Schemathesis reports it: the check, the response and a curl that reproduces it. */
  failures: string[];
}

export interface RunResult {
  name: string;
  operations: OperationResult[];
  /** Test cases generated, as the summary counts them. */
  cases: number;
  seconds: number;
  /** Schemathesis' warnings section (auth failures, mostly-404 operations…). */
  warnings: string;
  exitCode: number;
  output: string;
}

const toml = (value: string) => JSON.stringify(value);

function config(options: RunOptions): string {
  const lines: string[] = [];
  // Security schemes an operation lists are alternatives; Schemathesis presents the first one configured.
  for (const [scheme, value] of Object.entries(options.credentials)) {
    lines.push(`[auth.openapi.${scheme}]`, scheme === 'WriterToken' || scheme === 'BearerJWT' ? `bearer = ${toml(value)}` : `api_key = ${toml(value)}`);
  }
  if (options.headers) lines.push('[headers]', ...Object.entries(options.headers).map(([name, value]) => `${toml(name)} = ${toml(value)}`));
  return `${lines.join('\n')}\n`;
}

const unescapeXml = (text: string) =>
  text.replace(/&(lt|gt|quot|apos|amp|#(\d+)|#x([0-9a-f]+));/gi, (_, name: string, dec?: string, hex?: string) =>
    dec
      ? String.fromCodePoint(Number(dec))
      : hex
        ? String.fromCodePoint(parseInt(hex, 16))
        : ({ lt: '<', gt: '>', quot: '"', apos: "'", amp: '&' } as Record<string, string>)[name]!,
  );

/** Operations and their failures and errors from Schemathesis' JUnit report. */
export function parseJunit(xml: string): OperationResult[] {
  const operations: OperationResult[] = [];
  for (const match of xml.matchAll(/<testcase name="([^"]*)"[^>]*?(?:\/>|>([\s\S]*?)<\/testcase>)/g)) {
    const failures = [...(match[2] ?? '').matchAll(/<(failure|error)\b[^>]*>([\s\S]*?)<\/\1>/g)].map((failure) => unescapeXml(failure[2]!).trim());
    operations.push({ operation: unescapeXml(match[1]!), failures });
  }
  return operations;
}

/**
 * One `st run` against a service's OpenAPI document: every phase (its examples, the coverage phase's
 * boundary and negative values and unexpected methods, random fuzzing, and stateful sequences over the
 * links Schemathesis infers from responses), with the checks in CHECKS.
 */
export async function runSchemathesis(options: RunOptions): Promise<RunResult> {
  const st = pythonTool('schemathesis', [SCHEMATHESIS]).bin('st');
  // Its own working directory: Schemathesis leaves nothing in the repository.
  const dir = mkdtempSync(join(tmpdir(), `tempora-fuzz-${options.name}-`));
  try {
    writeFileSync(join(dir, 'schemathesis.toml'), config(options));
    const junit = join(dir, 'junit.xml');
    const args = [
      '--config-file',
      join(dir, 'schemathesis.toml'),
      'run',
      `${options.url}/openapi.json`,
      '--checks',
      CHECKS.join(','),
      '--max-examples',
      String(options.examples),
      '--seed',
      String(options.seed),
      '--workers',
      String(options.workers ?? 1),
      '--request-timeout',
      '30',
      '--suppress-health-check',
      'all',
      '--generation-database',
      'none',
      '--no-color',
      // The credentials are this run's own, so the reproducing curl may show them.
      '--output-sanitize',
      'false',
      '--report',
      'junit',
      '--report-junit-path',
      junit,
      ...(options.phases ? ['--phases', options.phases.join(',')] : []),
      ...(options.include ?? []).flatMap((id) => ['--include-operation-id', id]),
      ...(options.exclude ?? []).flatMap((id) => ['--exclude-operation-id', id]),
    ];
    const started = Date.now();
    let output = '';
    const exitCode = await new Promise<number>((resolve, reject) => {
      const child = spawn(st, args, { cwd: dir, env: { ...process.env, NO_COLOR: '1', COLUMNS: '120' }, stdio: ['ignore', 'pipe', 'pipe'] });
      child.stdout.on('data', (chunk) => (output += chunk));
      child.stderr.on('data', (chunk) => (output += chunk));
      child.once('error', reject);
      child.once('exit', (code) => resolve(code ?? 1));
    });
    let operations: OperationResult[];
    try {
      operations = parseJunit(readFileSync(junit, 'utf8'));
    } catch {
      throw new Error(`schemathesis (${options.name}) wrote no report (exit ${exitCode}):\n${output.slice(-6000)}`);
    }
    return {
      name: options.name,
      operations,
      cases: Number(/(\d+) generated/.exec(output)?.[1] ?? 0),
      seconds: (Date.now() - started) / 1000,
      warnings: /^=+ WARNINGS =+$([\s\S]*?)^=+ SUMMARY =+$/m.exec(output)?.[1]?.trim() ?? '',
      exitCode,
      output,
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
