// A real OCI registry for the tests: CNCF Distribution's `registry`, built from the Go module proxy, serving
// plain HTTP at LOCAL_REGISTRY (localhost:5001), where kind's local-registry recipe puts one and where the
// node's containerd and BuildKit expect it (test/k8s/node.ts). Images and charts pushed to it are what the
// node pulls.
import { type ChildProcess, spawn } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildGoTool, type GoTool, goToolPath } from './go-tool.ts';
import { LOCAL_REGISTRY } from './node.ts';

export const DISTRIBUTION_VERSION = 'v3.1.2';
const MODULE = 'github.com/distribution/distribution/v3';
/** CNCF Distribution's `registry` (about 4 min on 2 cores the first time). */
const DISTRIBUTION: GoTool = {
  name: 'registry',
  version: DISTRIBUTION_VERSION,
  module: MODULE,
  packages: [`${MODULE}/cmd/registry`],
  buildHint: 'about 4 min',
};

export interface Registry {
  /** `localhost:5001`: the host part of the references pushed to it. */
  host: string;
  stop(): Promise<void>;
}

/** Starts an empty registry at LOCAL_REGISTRY, storing into a temporary folder that stop() removes. */
export async function startRegistry(): Promise<Registry> {
  buildGoTool(DISTRIBUTION);
  const binary = goToolPath(DISTRIBUTION, 'registry');
  const dir = mkdtempSync(join(tmpdir(), 'tempora-registry-'));
  const port = LOCAL_REGISTRY.split(':')[1];
  writeFileSync(
    join(dir, 'config.yml'),
    `version: 0.1
log: {level: warn}
storage:
  filesystem: {rootdirectory: ${join(dir, 'data')}}
http: {addr: "127.0.0.1:${port}"}
`,
  );
  // Its log goes to a file, not a pipe: the tests block their event loop in spawnSync (helm, the release)
  // for minutes, and a registry writing into an undrained pipe stops answering once the pipe is full.
  const logFile = join(dir, 'registry.log');
  const logFd = openSync(logFile, 'a');
  // Distribution v3 exports OpenTelemetry traces to localhost:4318 unless told not to.
  const env = { ...process.env, OTEL_TRACES_EXPORTER: 'none' };
  const child: ChildProcess = spawn(binary, ['serve', join(dir, 'config.yml')], { stdio: ['ignore', 'ignore', logFd], env });
  closeSync(logFd);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  // Also when the tests end without stopping it (a failed hook, Ctrl-C): nothing of the run outlives it.
  const onExit = () => {
    child.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  };
  process.once('exit', onExit);
  const stop = async () => {
    process.off('exit', onExit);
    child.kill('SIGTERM');
    await exited;
    rmSync(dir, { recursive: true, force: true });
  };
  // The Distribution API's base endpoint answers 200 once the registry serves.
  const deadline = Date.now() + 30_000;
  for (;;) {
    const answer = await fetch(`http://127.0.0.1:${port}/v2/`).catch(() => undefined);
    if (answer?.ok) break;
    if (child.exitCode !== null || Date.now() > deadline) {
      const log = readFileSync(logFile, 'utf8');
      await stop();
      throw new Error(`the registry did not serve at ${LOCAL_REGISTRY} (is the port taken?):\n${log.slice(-2000)}`);
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  return { host: LOCAL_REGISTRY, stop };
}
