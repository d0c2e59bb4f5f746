/**
 * Real PostgreSQL and Redis for tests and benchmarks, from Debian's packages, started on loopback in a
 * temporary directory and stopped afterwards. Used by `npm test` and `npm run bench` when
 * DATABASE_URL / REDIS_URL are not given.
 */
import { type ChildProcess, execFileSync, spawn, spawnSync } from 'node:child_process';
import { appendFileSync, chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';

export interface Infra {
  env: Record<string, string>;
  stop(): Promise<void>;
}

const log = (message: string) => process.stderr.write(`[infra] ${message}\n`);

function portIsFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

/**
 * Ports this process has handed out: they are free until their user binds them, so a later pick must not
 * take one again (two services of one platform were once given the same port: EADDRINUSE in CI).
 */
const handedOut = new Set<number>();

/**
 * A port free now, only for a process that must be told its port before it starts because it cannot say
 * which one it got on port 0: third-party binaries (PostgreSQL, Redis, nginx, the Kubernetes components of
 * test/k8s and test/e2e), and a service whose address a peer must be given before it listens (the cycles
 * in test/support/platform.ts). Whatever can listen on port 0 and report its port does that instead: this
 * one is free only until its user binds it, and another process can take it in between. It lies below
 * the ephemeral range, since a port the kernel hands out for listen(0) is also one it may pick as an
 * outgoing connection's source port before the caller binds it (CI saw EADDRINUSE).
 */
export async function freePort(): Promise<number> {
  for (;;) {
    const port = 20_000 + Math.floor(Math.random() * 10_000);
    if (!handedOut.has(port) && (await portIsFree(port))) {
      handedOut.add(port);
      return port;
    }
  }
}

let aptUpdated = false;
export function aptInstall(...packages: string[]): void {
  if (userInfo().uid !== 0) throw new Error(`install ${packages.join(' ')} (needs root) or set DATABASE_URL/REDIS_URL`);
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  // Another apt (a fresh machine's unattended upgrades, or a parallel install) holds dpkg's lock for a
  // while: wait for it rather than fail the suite that needed the package.
  const wait = ['-o', 'DPkg::Lock::Timeout=600'];
  if (!aptUpdated) {
    log('apt-get update');
    execFileSync('apt-get', [...wait, 'update', '-qq'], { stdio: 'inherit', env });
    aptUpdated = true;
  }
  log(`apt-get install ${packages.join(' ')}`);
  execFileSync('apt-get', [...wait, 'install', '-y', '-qq', '--no-install-recommends', ...packages], { stdio: 'inherit', env });
}

function postgresBin(): string | undefined {
  const root = '/usr/lib/postgresql';
  if (!existsSync(root)) return undefined;
  const versions = readdirSync(root)
    .filter((v) => existsSync(join(root, v, 'bin', 'initdb')))
    .sort((a, b) => Number(b) - Number(a));
  return versions[0] ? join(root, versions[0], 'bin') : undefined;
}

/** PostgreSQL refuses to run as root: as root, run it as the `postgres` user the package creates. */
function asDbUser(command: string, args: string[]): [string, string[]] {
  return userInfo().uid === 0 ? ['runuser', ['-u', 'postgres', '--', command, ...args]] : [command, args];
}

/**
 * Where a server listens: loopback by default. `host` another address (the end-to-end tests' node address,
 * which pods reach); `allow` the network whose clients PostgreSQL trusts besides loopback.
 */
export interface ListenOptions {
  host?: string;
  allow?: string;
  /**
   * PostgreSQL keeps every acknowledged commit across a crash, as in production. Otherwise commits are
   * acknowledged before they reach the disk (fast tests), and an immediate stop loses the last ones.
   */
  durable?: boolean;
}

export async function startPostgres({
  host = '127.0.0.1',
  allow,
  durable = false,
}: ListenOptions = {}): Promise<{ url: string; down(): Promise<void>; up(): Promise<void>; stop(): Promise<void> }> {
  let bin = postgresBin();
  if (!bin) {
    aptInstall('postgresql', 'postgresql-contrib');
    bin = postgresBin();
    if (!bin) throw new Error('PostgreSQL did not install');
  }
  const dir = mkdtempSync(join(tmpdir(), 'tempora-pg-'));
  if (userInfo().uid === 0) {
    const uid = Number(execFileSync('id', ['-u', 'postgres']).toString().trim());
    const gid = Number(execFileSync('id', ['-g', 'postgres']).toString().trim());
    chownSync(dir, uid, gid);
  }
  const data = join(dir, 'data');
  const port = await freePort();
  const run = (command: string, args: string[]) => {
    const [cmd, argv] = asDbUser(join(bin!, command), args);
    const result = spawnSync(cmd, argv, { encoding: 'utf8' });
    if (result.status !== 0) throw new Error(`${command} failed: ${result.stderr || result.stdout}`);
  };
  run('initdb', ['-D', data, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--locale=C.UTF-8']);
  if (allow) appendFileSync(join(data, 'pg_hba.conf'), `host all all ${allow} trust\n`);
  const options = [
    `-p ${port}`,
    `-k ${dir}`,
    `-c listen_addresses=${host}`,
    ...(durable ? [] : ['-c fsync=off', '-c synchronous_commit=off', '-c full_page_writes=off']),
    '-c max_connections=400',
    '-c shared_buffers=256MB',
  ].join(' ');
  run('pg_ctl', ['-D', data, '-o', options, '-l', join(dir, 'postgres.log'), '-w', 'start']);
  log(`postgresql on ${host}:${port} (${dir})`);
  return {
    url: `postgres://postgres@${host}:${port}/postgres`,
    // Fault tests: an immediate shutdown (connections cut, as in a crash) and a start on the same port.
    async down() {
      run('pg_ctl', ['-D', data, '-m', 'immediate', '-w', 'stop']);
    },
    async up() {
      run('pg_ctl', ['-D', data, '-o', options, '-l', join(dir, 'postgres.log'), '-w', 'start']);
    },
    async stop() {
      try {
        run('pg_ctl', ['-D', data, '-m', 'fast', '-w', 'stop']);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  };
}

export async function startRedis({
  host = '127.0.0.1',
}: ListenOptions = {}): Promise<{ url: string; kill(): Promise<void>; up(): Promise<void>; stop(): Promise<void> }> {
  const which = spawnSync('sh', ['-c', 'command -v redis-server'], { encoding: 'utf8' });
  if (which.status !== 0) aptInstall('redis-server');
  const dir = mkdtempSync(join(tmpdir(), 'tempora-redis-'));
  const port = await freePort();
  // Protected mode refuses every client but loopback ones while there is no password.
  const protectedMode = host === '127.0.0.1' ? 'yes' : 'no';
  const launch = async (): Promise<ChildProcess> => {
    const child = spawn(
      'redis-server',
      ['--port', String(port), '--bind', host, '--protected-mode', protectedMode, '--save', '', '--appendonly', 'no', '--dir', dir],
      {
        stdio: ['ignore', 'pipe', 'inherit'],
      },
    );
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('redis-server did not start')), 15_000);
      child.stdout!.on('data', (chunk: Buffer) => {
        if (chunk.toString().includes('Ready to accept connections')) {
          clearTimeout(timer);
          resolve();
        }
      });
      child.once('exit', (code) => reject(new Error(`redis-server exited with ${code}`)));
    });
    child.stdout!.resume();
    return child;
  };
  let child = await launch();
  log(`redis on ${host}:${port}`);
  const end = async (signal: NodeJS.Signals) => {
    if (child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill(signal);
      await exited;
    }
  };
  return {
    url: `redis://${host}:${port}`,
    // Fault tests: a crash (SIGKILL, nothing saved) and a fresh start on the same port.
    kill: () => end('SIGKILL'),
    async up() {
      child = await launch();
    },
    async stop() {
      await end('SIGTERM');
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Starts what the environment does not already provide. */
export async function startInfra(env: NodeJS.ProcessEnv = process.env): Promise<Infra> {
  const stops: Array<() => Promise<void>> = [];
  const provided: Record<string, string> = {};
  try {
    if (env.DATABASE_URL) provided.DATABASE_URL = env.DATABASE_URL;
    else {
      const pg = await startPostgres();
      stops.push(pg.stop);
      provided.DATABASE_URL = pg.url;
    }
    if (env.REDIS_URL) provided.REDIS_URL = env.REDIS_URL;
    else {
      const redis = await startRedis();
      stops.push(redis.stop);
      provided.REDIS_URL = redis.url;
    }
  } catch (error) {
    for (const stop of stops.reverse()) await stop().catch(() => {});
    throw error;
  }
  return {
    env: provided,
    async stop() {
      for (const stop of stops.reverse()) await stop().catch((error: unknown) => log(`stop failed: ${String(error)}`));
    },
  };
}
