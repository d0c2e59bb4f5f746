// The Go programs the tests run beside the node (BuildKit, CoreDNS, the registry, kube-router,
// prometheus-adapter, KEDA): each built once per version from the machine's Go module proxy by
// build-go-tool.sh into the tests' cache, which every run after the first finds and reuses.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { cacheRoot } from '../support/cache.ts';

const HERE = dirname(fileURLToPath(import.meta.url));

export interface GoTool {
  /** The cache folder's name: the binaries land in <cache>/<name>/<version>. */
  name: string;
  version: string;
  module: string;
  /** The commands' packages; each binary is named after its package's last path element. */
  packages: string[];
  /** How long a cold build takes here, shown while it runs. */
  buildHint: string;
  extraLdflags?: string;
}

/** Where the tool's binary for `command` (a package's last path element) is, built or not. */
export function goToolPath(tool: GoTool, command: string): string {
  return join(cacheRoot(), tool.name, tool.version, command);
}

/** Whether every command of the tool is in the cache already. */
export function goToolCached(tool: GoTool): boolean {
  return tool.packages.every((p) => existsSync(goToolPath(tool, commandName(p))));
}

/** Builds what the cache lacks (nothing when cached); goToolPath then names each binary. */
export function buildGoTool(tool: GoTool): void {
  const built = spawnSync('bash', [join(HERE, 'build-go-tool.sh'), tool.name, tool.version, tool.module, ...tool.packages], {
    stdio: ['ignore', 'inherit', 'inherit'],
    env: { ...process.env, BUILD_HINT: tool.buildHint, ...(tool.extraLdflags ? { EXTRA_LDFLAGS: tool.extraLdflags } : {}) },
  });
  if (built.status !== 0) throw new Error(`building ${tool.name} ${tool.version} failed (exit ${built.status})`);
}

function commandName(pkg: string): string {
  return pkg.slice(pkg.lastIndexOf('/') + 1);
}
