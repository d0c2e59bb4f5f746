import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const bench = fileURLToPath(new URL('..', import.meta.url));

/** Installs the benchmarks' peers (bench/package.json) on first use, so the project's own install skips them. */
export function ensureBenchPeers(): void {
  if (existsSync(`${bench}node_modules/fast-gateway/package.json`)) return;
  process.stderr.write('[bench] installing the benchmark peers (bench/package.json)…\n');
  execFileSync('npm', ['install', '--no-audit', '--no-fund', '--loglevel=error', '--engine-strict=false'], { cwd: bench, stdio: 'inherit' });
}
