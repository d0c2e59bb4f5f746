import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort, freePortRange } from '../../scripts/infra.ts';
import { DEFAULT_PORTS, type ServiceName } from '../../services/kit/src/runtime/config.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));

export interface Platform {
  /** Each service's base URL. */
  urls: Record<ServiceName, string>;
  /** Each service's metrics port, where its /metrics answers (METRICS_PORT). */
  metricsUrls: Record<ServiceName, string>;
  /** Each worker's /metrics URL, by name (only with `shared`). */
  workers: Record<string, string>;
  /** The local Stripe stand-in billing sells against in test mode. */
  stripe: string;
  /** What the platform printed so far (for failure messages). */
  output(): string;
  stop(): Promise<void>;
}

/**
 * The platform as `npm start` runs it, on free ports and a data directory of its own, so a test never
 * meets a platform a developer runs. `shared` gives it the test's PostgreSQL (a fresh database) and Redis,
 * which runs the workers as processes too; `env` adds or overrides variables.
 */
export async function startPlatform(options: { shared?: { databaseUrl: string; redisUrl: string }; env?: NodeJS.ProcessEnv } = {}): Promise<Platform> {
  const dataDir = mkdtempSync(join(tmpdir(), 'tempora-platform-'));
  const env: NodeJS.ProcessEnv = { ...process.env, TEMPORA_DATA_DIR: dataDir, LOG_LEVEL: 'warn' };
  for (const name of ['DATABASE_URL', 'REDIS_URL', 'REDIS_KEY_PREFIX', 'SERVICE_KEY', 'ADMIN_KEY', 'WRITER_TOKENS', 'CALLBACK_SECRET', 'STRIPE_SECRET_KEY'])
    delete env[name];
  // Its own Redis key prefix, so rate-limit windows and queues are not shared with other tests on the same Redis.
  if (options.shared)
    Object.assign(env, {
      DATABASE_URL: options.shared.databaseUrl,
      REDIS_URL: options.shared.redisUrl,
      REDIS_KEY_PREFIX: `tempora-${randomBytes(4).toString('hex')}`,
    });
  const urls = {} as Record<ServiceName, string>;
  const metricsUrls = {} as Record<ServiceName, string>;
  for (const service of Object.keys(DEFAULT_PORTS) as ServiceName[]) {
    const [port, metricsPort] = [await freePort(), await freePort()];
    Object.assign(env, { [`${service.toUpperCase()}_PORT`]: String(port), [`${service.toUpperCase()}_METRICS_PORT`]: String(metricsPort) });
    urls[service] = `http://127.0.0.1:${port}`;
    metricsUrls[service] = `http://127.0.0.1:${metricsPort}`;
  }
  env.STRIPE_STAND_IN_PORT = String(await freePort());
  // Workers take consecutive ports from the base (npm start runs up to four), free when drawn.
  env.WORKER_BASE_PORT = String(await freePortRange(4));
  Object.assign(env, options.env);

  let said = '';
  const child: ChildProcess = spawn(process.execPath, ['scripts/start.ts'], { cwd: root, env, stdio: ['ignore', 'pipe', 'pipe'] });
  child.stderr!.on('data', (chunk) => (said += chunk));
  await new Promise<void>((resolve, reject) => {
    child.stdout!.on('data', (chunk) => {
      said += chunk;
      if (said.includes('Ctrl-C stops everything')) resolve();
    });
    child.once('exit', (code) => reject(new Error(`npm start exited (${code}):\n${said.slice(-4000)}`)));
  });
  const workers: Record<string, string> = {};
  for (const match of said.matchAll(/^ {2}([a-z-]+worker|graph-[a-z]+) +(http:\/\/\S+\/metrics)$/gm)) workers[match[1]!] = match[2]!;
  return {
    urls,
    metricsUrls,
    workers,
    stripe: `http://127.0.0.1:${env.STRIPE_STAND_IN_PORT}`,
    output: () => said,
    async stop() {
      if (child.exitCode === null) {
        const exited = new Promise((resolve) => child.once('exit', resolve));
        child.kill('SIGTERM');
        await exited;
      }
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
