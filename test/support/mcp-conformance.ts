import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LATEST_PROTOCOL_VERSION } from '@modelcontextprotocol/sdk/types.js';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { listenStandIn, type StandIn } from './http.ts';

/**
 * What the MCP conformance tests of the graph and the conductor share: the official suite
 * (@modelcontextprotocol/conformance) run against a URL, a loopback relay that adds credentials the suite
 * cannot send, raw JSON-RPC posts with chosen Host, Origin and protocol versions, and the 2020-12 check of
 * tool input schemas.
 */

const CLI = createRequire(import.meta.url).resolve('@modelcontextprotocol/conformance/dist/index.js');

export interface SuiteRun {
  /** 0: every scenario passed or failed as listed; 1: an unlisted failure, or a listed one that passes. */
  code: number | null;
  output: string;
  /** Each scenario's checks by status (SUCCESS, FAILURE, WARNING, ...). */
  scenarios: Map<string, Array<{ id: string; status: string; errorMessage?: string }>>;
}

/**
 * Every server scenario of the suite (`--suite all`: the pending ones too) against `url`, judged by the
 * suite itself against `expectedFailures`. Run as a child process: the servers under test answer from this
 * one, so it must not block.
 */
export async function runConformance(url: string, expectedFailures: string): Promise<SuiteRun> {
  const dir = mkdtempSync(join(tmpdir(), 'mcp-conformance-'));
  try {
    const child = spawn(process.execPath, [CLI, 'server', '--url', url, '--suite', 'all', '--expected-failures', expectedFailures, '--output-dir', dir], {
      cwd: dir,
    });
    let output = '';
    child.stdout.on('data', (chunk) => (output += chunk));
    child.stderr.on('data', (chunk) => (output += chunk));
    const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
    const scenarios = new Map<string, Array<{ id: string; status: string; errorMessage?: string }>>();
    for (const entry of readdirSync(dir)) {
      // Results land in server-<scenario>-<ISO timestamp>/checks.json.
      const scenario = /^server-(.+)-\d{4}-\d\d-\d\dT[\d-]+Z$/.exec(entry)?.[1];
      if (scenario) scenarios.set(scenario, JSON.parse(readFileSync(join(dir, entry, 'checks.json'), 'utf8')));
    }
    return { code, output, scenarios };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Asserts the suite's verdict, and that the DNS-rebinding scenario ran and every one of its checks passed. */
export function assertConformant(run: SuiteRun): void {
  assert.equal(run.code, 0, `the MCP conformance suite failed:\n${run.output}`);
  const rebinding = run.scenarios.get('dns-rebinding-protection');
  assert.ok(rebinding && rebinding.length > 0, `the dns-rebinding-protection scenario did not run:\n${run.output}`);
  for (const check of rebinding) assert.equal(check.status, 'SUCCESS', `${check.id}: ${check.errorMessage}`);
  assert.ok(run.scenarios.size >= 30, `only ${run.scenarios.size} scenarios ran`);
}

/**
 * A loopback relay to `target` adding `headers` (a user's Bearer token) to every request, as an MCP client
 * configured with credentials would: the suite has no way to send them. Host and Origin pass unchanged,
 * so the server under test sees what the suite sent.
 */
export async function credentialRelay(target: string, headers: Record<string, string>): Promise<StandIn> {
  const upstream = new URL(target);
  return listenStandIn((req, res) => {
    const forwarded = httpRequest(
      { host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers: { ...req.headers, ...headers } },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    forwarded.on('error', () => res.destroy());
    req.pipe(forwarded);
  });
}

export interface RawReply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: any;
}

/** A JSON-RPC POST to `url` with the given fields (Host among them, which fetch will not set). */
export async function postJsonRpc(url: string, message: unknown, headers: Record<string, string> = {}): Promise<RawReply> {
  const target = new URL(url);
  const body = JSON.stringify(message);
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        host: target.hostname,
        port: target.port,
        method: 'POST',
        path: `${target.pathname}${target.search}`,
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'content-length': Buffer.byteLength(body), ...headers },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk) => (text += chunk));
        res.on('end', () => {
          const type = String(res.headers['content-type'] ?? '');
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body: type.includes('json') && text ? JSON.parse(text) : text });
        });
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

export const initialize = (protocolVersion: string, id = 1) => ({
  jsonrpc: '2.0',
  id,
  method: 'initialize',
  params: { protocolVersion, capabilities: {}, clientInfo: { name: 'tempora-conformance-test', version: '1.0.0' } },
});

/** The newest revision the installed SDK speaks, and the oldest one still in use by clients (Streamable HTTP's first). */
export const NEWEST_PROTOCOL = LATEST_PROTOCOL_VERSION;
export const OLDER_PROTOCOL = '2025-03-26';

/**
 * Asserts that every tool's input schema is a valid JSON Schema 2020-12 document (MCP 2025-11-25: input
 * schemas default to that dialect), describing an object: valid against ajv's 2020-12 meta-schema, and
 * compiled in strict mode, which also refuses keywords 2020-12 does not know (a misspelt `minimun`,
 * another dialect's). OpenAPI's `example` is admitted as the annotation it is: the services' shared
 * parameter schemas carry it for their OpenAPI documents.
 */
export function assertInputSchemas2020(tools: Array<{ name: string; inputSchema: Record<string, unknown> }>): void {
  assert.ok(tools.length > 0, 'no tools listed');
  const ajv = new Ajv2020({ strict: true, validateFormats: false });
  ajv.addKeyword('example');
  for (const tool of tools) {
    assert.equal(tool.inputSchema.type, 'object', tool.name);
    const schema = tool.inputSchema.$schema;
    assert.ok(schema === undefined || schema === 'https://json-schema.org/draft/2020-12/schema', `${tool.name}: $schema ${String(schema)} is not 2020-12`);
    assert.equal(ajv.validateSchema(tool.inputSchema), true, `${tool.name}: ${ajv.errorsText(ajv.errors)}`);
    assert.doesNotThrow(() => ajv.compile(tool.inputSchema), tool.name);
  }
}
