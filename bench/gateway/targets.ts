/**
 * The processes the gateway benchmarks compare, started the same way for each of them: the trivial
 * backend, the gateway (its own database, a signed-in enterprise user, limits out of reach), fast-gateway
 * and the header-contract proxy. `wrap` runs a target under another command (callgrind).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Agent, request } from 'undici';
import { createDatabase } from '../../test/support/database.ts';
import { announced, serviceListening } from '../../test/support/platform.ts';
import { ensureBenchPeers } from '../support/peers.ts';

const here = fileURLToPath(new URL('.', import.meta.url));

export interface Target {
  name: string;
  /** The URL the load is sent to. */
  url: string;
  headers: Record<string, string>;
  process: ChildProcess;
  /** The environment it was started with (callgrind_control must share its HOST). */
  env: NodeJS.ProcessEnv;
}

/** A command line prefix to run a Node target under, e.g. ['valgrind', '--tool=callgrind', ...]. */
export type Wrap = (name: string) => string[];

interface Spawned {
  child: ChildProcess;
  env: NodeJS.ProcessEnv;
  /** The port the script listens on, once it prints `ready <port>` (rejects if it exits first). */
  ready: Promise<number>;
}

export class Targets {
  private readonly children: ChildProcess[] = [];
  private readonly wrap: Wrap | undefined;

  constructor(wrap?: Wrap) {
    this.wrap = wrap;
  }

  private spawnNode(name: string, script: string, env: Record<string, string>): Spawned {
    const fullEnv = { ...process.env, ...env };
    const command = [...(this.wrap?.(name) ?? []), process.execPath, script];
    const child = spawn(command[0]!, command.slice(1), { env: fullEnv, stdio: ['ignore', 'pipe', 'inherit'] });
    this.children.push(child);
    // Read by whole lines: a chunk may end inside `ready <port>`.
    const ready = announced(child, (line) => {
      const port = /^ready (\d+)$/.exec(line)?.[1];
      return port === undefined ? undefined : Number(port);
    });
    return { child, env: fullEnv, ready };
  }

  /**
   * A script that prints `ready` is taken at its word rather than polled over HTTP: in the full run, peers
   * polled by the bench before wrk measured up to a third slower (bench/gateway/README.md).
   */
  private async said(name: string, spawned: Spawned): Promise<Target> {
    const port = await spawned.ready;
    return { name, url: `http://127.0.0.1:${port}/api/v1/bench`, headers: {}, process: spawned.child, env: spawned.env };
  }

  async backend(): Promise<Target> {
    return this.said('backend, direct', this.spawnNode('backend', join(here, 'backend.ts'), {}));
  }

  /** The gateway on a database of its own, with a dev token for an enterprise user; `env` adds to its settings. */
  async gateway(backend: string, dataDir: string, env: Record<string, string> = {}): Promise<Target> {
    const spawned = this.spawnNode('gateway', join(here, '../../services/gateway/src/main.ts'), {
      DATABASE_URL: await createDatabase('gateway_bench'),
      PORT: '0',
      METRICS_PORT: '0',
      HOST: '127.0.0.1',
      TEMPORA_DATA_DIR: dataDir,
      ADMIN_KEY: 'bench-admin-key',
      SERVICE_KEY: 'bench-service-key',
      GENERATION_URL: backend,
      // Limits are checked on every request but set out of reach, so the figures measure the work, not 429s.
      RATE_LIMIT_MULTIPLIER: '100000',
      // Its "listening" line (info) says which port it bound (port 0: its own at once).
      LOG_LEVEL: 'info',
      OTEL_SDK_DISABLED: 'true',
      ...env,
    });
    const { url } = await announced(spawned.child, serviceListening('gateway'));
    // The gateway prints no `ready`: it is polled, then signed into, as a client would.
    const exited = () => (spawned.child.exitCode === null && spawned.child.signalCode === null ? undefined : 'the gateway exited');
    await waitFor(`${url}/health`, {}, exited);
    const connection = new Agent({ connections: 1 });
    let token: string;
    try {
      const signIn = await request(`${url}/api/v1/auth/dev/token`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-admin-key': 'bench-admin-key' },
        body: JSON.stringify({ external_id: 'bench', tier: 'enterprise' }),
        dispatcher: connection,
      });
      ({ access_token: token } = (await signIn.body.json()) as { access_token: string });
    } finally {
      await connection.close();
    }
    const headers = { authorization: `Bearer ${token}` };
    await waitFor(`${url}/api/v1/bench`, headers, exited);
    return { name: 'gateway (JWT + user lookup + rate limit + proxy)', url: `${url}/api/v1/bench`, headers, process: spawned.child, env: spawned.env };
  }

  async fastGateway(backend: string): Promise<Target> {
    ensureBenchPeers();
    return this.said('fast-gateway', this.spawnNode('fast-gateway', join(here, 'fast-gateway.ts'), { TARGET: backend }));
  }

  async headerContract(backend: string): Promise<Target> {
    return this.said('bare proxy with the header contract only', this.spawnNode('header-contract', join(here, 'header-contract.ts'), { TARGET: backend }));
  }

  /** Stops one target, waiting for its exit (callgrind writes its last figures then). */
  async stop(target: Target): Promise<void> {
    if (target.process.exitCode !== null || target.process.signalCode !== null) return;
    const exited = new Promise((resolve) => target.process.once('exit', resolve));
    target.process.kill('SIGTERM');
    await exited;
  }

  stopAll(): void {
    for (const child of this.children) child.kill('SIGTERM');
  }
}

/**
 * Polls `url` until it answers 200 (up to five minutes: a target under callgrind starts slowly), on a
 * connection of its own, closed afterwards: none is left idle in a pool, where the server may close it.
 */
export async function waitFor(url: string, headers: Record<string, string> = {}, failed: () => string | undefined = () => undefined): Promise<void> {
  const connection = new Agent({ connections: 1 });
  try {
    for (let i = 0; i < 3000; i += 1) {
      const reason = failed();
      if (reason) throw new Error(reason);
      try {
        const response = await request(url, { headers, dispatcher: connection });
        await response.body.text();
        if (response.statusCode === 200) return;
      } catch {
        // not yet
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    throw new Error(`${url} never answered 200`);
  } finally {
    await connection.close();
  }
}
