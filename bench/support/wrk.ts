/**
 * wrk (C, from Debian) as the benchmarks' HTTP client: it takes as little of the two cores from the
 * service measured as a client can, and its --latency report gives p50 and p99. A Node client adds its
 * own parsing and decoding to every request (about 0.3 ms for a 30 KB answer), which is not the service's.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { aptInstall } from '../../scripts/infra.ts';

const ROTATE_SCRIPT = fileURLToPath(new URL('rotate.lua', import.meta.url));

export interface WrkFigures {
  rps: number;
  total: number;
  p50: number;
  p99: number;
  /** Connect, read, write and timeout errors together. */
  errors: number;
  non2xx: number;
}

export interface WrkRun {
  /** The URL, or with `paths` the origin the paths are sent to. */
  url: string;
  headers?: Record<string, string>;
  seconds: number;
  connections: number;
  /** Request these paths in turn (one after another on each connection) instead of the URL's own. */
  paths?: readonly string[];
}

/** Installs what is missing from Debian's packages, as `npm test` does for PostgreSQL and Redis. */
export function ensureCommands(commands: ReadonlyArray<readonly [command: string, debianPackage: string]>): void {
  const missing = commands.filter(([command]) => spawnSync('sh', ['-c', `command -v ${command} || test -x /usr/sbin/${command}`]).status !== 0);
  if (missing.length > 0) aptInstall(...missing.map(([, pkg]) => pkg));
}

export function wrk(run: WrkRun): WrkFigures {
  const headers = Object.entries(run.headers ?? {}).flatMap(([name, value]) => ['-H', `${name}: ${value}`]);
  const args = ['-t1', `-c${run.connections}`, `-d${run.seconds}s`, '--latency', ...headers];
  let listDir: string | undefined;
  const env = { ...process.env };
  if (run.paths) {
    listDir = mkdtempSync(join(tmpdir(), 'tempora-wrk-'));
    env.WRK_PATHS = join(listDir, 'paths.txt');
    writeFileSync(env.WRK_PATHS, `${run.paths.join('\n')}\n`);
    args.push('-s', ROTATE_SCRIPT);
  }
  try {
    const out = spawnSync('wrk', [...args, run.url], { encoding: 'utf8', env }).stdout;
    const number = (pattern: RegExp) => Number(pattern.exec(out)?.[1] ?? 0);
    const ms = (pattern: RegExp) => {
      const match = pattern.exec(out);
      if (!match) return Number.NaN;
      return Number(match[1]) * { us: 0.001, ms: 1, s: 1000 }[match[2] as 'us' | 'ms' | 's'];
    };
    const socketErrors = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(out);
    return {
      rps: number(/Requests\/sec:\s+([\d.]+)/),
      total: number(/(\d+) requests in/),
      p50: ms(/^\s+50%\s+([\d.]+)(us|ms|s)$/m),
      p99: ms(/^\s+99%\s+([\d.]+)(us|ms|s)$/m),
      errors: socketErrors ? socketErrors.slice(1).reduce((sum, value) => sum + Number(value), 0) : 0,
      non2xx: number(/Non-2xx or 3xx responses: (\d+)/),
    };
  } finally {
    if (listDir) rmSync(listDir, { recursive: true, force: true });
  }
}
