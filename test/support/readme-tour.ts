import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { DEFAULT_PORTS, type ServiceName } from '../../services/kit/src/runtime/config.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));

/**
 * The README tour's shell blocks, in order, as one script for `bash -euo pipefail`, pointed at `urls`
 * instead of the conventional ports; with `strict`, curl fails on an HTTP error instead of printing it.
 */
export function readmeTour(urls: Record<ServiceName, string>, options: { strict?: boolean; stripe?: string } = {}): string {
  const readme = readFileSync(join(root, 'README.md'), 'utf8');
  const start = readme.indexOf('## A five-minute tour');
  const tour = readme.slice(start, readme.indexOf('\n## ', start + 1));
  const blocks = [...tour.matchAll(/```sh\n([\s\S]*?)```/g)].map((match) => match[1]!);
  assert.ok(blocks.length >= 2, 'the README has a tour');
  let script = blocks.join('\n');
  if (options.strict) script = script.replaceAll(/curl -s /g, 'curl -sS --fail-with-body ');
  for (const [service, url] of Object.entries(urls)) script = script.replaceAll(`http://127.0.0.1:${DEFAULT_PORTS[service as ServiceName]}`, url);
  // The tour runs in a folder of its own: the client example is the repository's, on this process's Node 22.
  script = script.replaceAll('npx node clients/', `${process.execPath} ${root}clients/`);
  // The Stripe stand-in's conventional port under npm start.
  if (options.stripe) script = script.replaceAll('http://127.0.0.1:12111', options.stripe);
  return script;
}

/** Runs the tour's script with bash (stdin closed: Debian's bash reads bash.bashrc when stdin is a socket). */
export function runTour(script: string, cwd: string): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn('bash', ['-euo', 'pipefail', '-c', script], { cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk) => (stdout += chunk));
    child.stderr.on('data', (chunk) => (stderr += chunk));
    const timer = setTimeout(() => child.kill('SIGKILL'), 300_000);
    child.once('error', reject);
    child.once('close', (status) => {
      clearTimeout(timer);
      resolve({ status, stdout, stderr });
    });
  });
}
