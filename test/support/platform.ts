import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { freePort } from '../../scripts/infra.ts';
import { plan, type Unit } from '../../scripts/start.ts';
import { DEFAULT_PORTS, type ServiceName } from '../../services/kit/src/runtime/config.ts';
import { waitFor } from './wait.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));

/** Where a process listens, as it said once it had bound its port: a service's metrics port too. */
interface Address {
  url: string;
  metricsUrl?: string;
}

/** A process started by `launch`: it, and where it listens once it says so. */
interface Launched<T> {
  child: ChildProcess;
  announced: Promise<T>;
}

/** A process of the platform exited while it was waited for: nothing it would answer can come. */
class Exited extends Error {}

/** A log line of pino's as its object, or undefined for a line that is not one. */
export const asJson = (line: string): Record<string, unknown> | undefined => {
  if (!line.startsWith('{')) return undefined;
  try {
    return JSON.parse(line) as Record<string, unknown>;
  } catch {
    return undefined;
  }
};

/** Pino's level numbers: what LOG_LEVEL lets through. */
const LEVELS: Record<string, number> = { trace: 10, debug: 20, info: 30, warn: 40, error: 50, fatal: 60, silent: Number.POSITIVE_INFINITY };

/**
 * A `keep` for `launch` that passes `write` what LOG_LEVEL `level` would have shown (and every line that is
 * not a log entry): a process that says where it listens logs at info, whatever its caller wants to read.
 */
export const shownAt =
  (level: string, write: (line: string) => void) =>
  (line: string): void => {
    const entry = asJson(line)?.level;
    if (typeof entry !== 'number' || entry >= (LEVELS[level] ?? LEVELS.info!)) write(line);
  };

/** A service's "listening" line (logged at info): the URL it bound and its metrics port's. */
export const serviceListening =
  (service: string) =>
  (line: string): Address | undefined => {
    const entry = asJson(line);
    return entry?.msg === `${service} service listening` ? { url: String(entry.url), metricsUrl: String(entry.metrics).replace(/\/metrics$/, '') } : undefined;
  };

/** The line a worker logs (at info) once its /health and /metrics listen: the graph's workers and the agent-pool worker. */
const workerListening = (line: string): Address | undefined => {
  const entry = asJson(line);
  const url = entry?.msg === 'graph worker started' ? entry.endpoints : entry?.msg === 'serving /health and /metrics' ? entry.url : undefined;
  return typeof url === 'string' ? { url } : undefined;
};

/** The Stripe stand-in's first line: `Stripe stand-in at <url>: events to …`. */
const standInListening = (line: string): Address | undefined => {
  const url = /^Stripe stand-in at (http:\/\/[^\s:]+:\d+):/.exec(line)?.[1];
  return url ? { url } : undefined;
};

/**
 * Waits until `child` (its stdout or stderr piped, or both) says where it listens: `announce` finds that in
 * a line of its output, which `keep` is given too. It fails as soon as the process exits.
 */
export function announced<T>(child: ChildProcess, announce: (line: string) => T | undefined, keep = (_line: string) => {}): Promise<T> {
  let tail = '';
  const found = new Promise<T>((resolve, reject) => {
    for (const stream of [child.stdout, child.stderr])
      if (stream)
        createInterface({ input: stream }).on('line', (line) => {
          tail = `${tail}${line}\n`.slice(-4000);
          keep(line);
          const value = announce(line);
          if (value !== undefined) resolve(value);
        });
    child.once('exit', (code, signal) =>
      reject(new Error(`${child.spawnargs.join(' ')} exited (${signal ?? code}) before it said where it listens:\n${tail}`)),
    );
  });
  // Nobody may be waiting any more when the process exits after it announced, or after a sibling failed the start.
  found.catch(() => {});
  return found;
}

/**
 * `node <script>` from the repository's root as a process of its own, told to listen on port 0 so that the
 * port is its own at once (one picked first and bound later can be taken in between), and where it listens
 * once it says so (`announced`).
 */
export function launch<T>(
  script: string,
  args: string[],
  env: NodeJS.ProcessEnv,
  announce: (line: string) => T | undefined,
  keep?: (line: string) => void,
): Launched<T> {
  const child = spawn(process.execPath, [script, ...args], { cwd: root, env, stdio: ['ignore', 'pipe', 'pipe'] });
  return { child, announced: announced(child, announce, keep) };
}

/** Ends `child` with SIGTERM (SIGKILL if it still runs 15 s later, as `npm start` does) and waits until it has exited. */
export async function end(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  const force = setTimeout(() => child.kill('SIGKILL'), 15_000);
  await exited;
  clearTimeout(force);
}

export interface Platform {
  /** Each service's base URL. */
  urls: Record<ServiceName, string>;
  /** Each service's metrics port, where its /metrics answers (METRICS_PORT). */
  metricsUrls: Record<ServiceName, string>;
  /** Each worker's /metrics URL, by name (only with `shared`). */
  workers: Record<string, string>;
  /** The local Stripe stand-in billing sells against in test mode. */
  stripe: string;
  /** What the platform printed so far, at its LOG_LEVEL (for failure messages). */
  output(): string;
  stop(): Promise<void>;
}

/**
 * Whose addresses a process needs when it starts, besides the gateway's and generation's, whose ports are
 * picked beforehand: every service behind the gateway calls it (tokens, the ledger) and the gateway calls
 * them all; the graph calls generation, which needs everyone's address at once (a callback may reach none
 * of them). So one of each pair is named before it listens; every other process listens on port 0 and
 * starts once the addresses it needs are known.
 */
const NEEDS: Record<string, string[]> = {
  billing: ['stripe-stand-in'],
  conductor: ['graph', 'simulation'],
  generation: ['graph', 'simulation', 'conductor', 'billing', 'stripe-stand-in'],
  gateway: ['graph', 'simulation', 'conductor', 'billing'],
};
const PICKED = ['gateway', 'generation'];

/** The processes of `npm start`'s plan, each started once the addresses it needs are known, and where they listen. */
class Processes {
  readonly addresses = new Map<string, Address>();
  readonly #children = new Map<string, ChildProcess>();
  readonly #started = new Map<string, Promise<Address>>();
  readonly #byName: Map<string, Unit>;
  readonly #env: NodeJS.ProcessEnv;
  readonly #keep: (line: string) => void;
  #stopping = false;

  constructor(units: Unit[], env: NodeJS.ProcessEnv, keep: (line: string) => void) {
    this.#byName = new Map(units.map((unit) => [unit.name, unit]));
    this.#env = env;
    this.#keep = keep;
  }

  /** Starts `group` and waits until each answers on its ready path, as `npm start` does (failing if one exits). */
  serving(group: Unit[]): Promise<unknown> {
    return Promise.all(
      group.map(async (unit) => {
        const { url } = await this.#start(unit);
        const child = this.#children.get(unit.name)!;
        const ready = `${url}${unit.readyPath ?? '/health'}`;
        await waitFor(
          `${unit.name} at ${ready}`,
          async () => {
            if (child.exitCode !== null || child.signalCode !== null) throw new Exited(`${unit.name} exited before it answered ${ready}`);
            return (await fetch(ready)).ok;
          },
          { timeoutMs: 300_000, intervalMs: 250, fatal: (error) => error instanceof Exited },
        );
      }),
    );
  }

  async stop(): Promise<void> {
    this.#stopping = true;
    await Promise.all([...this.#children.values()].map((child) => end(child)));
  }

  #start(unit: Unit): Promise<Address> {
    let address = this.#started.get(unit.name);
    if (!address) {
      address = (async () => {
        const needs = (NEEDS[unit.name] ?? []).filter((name) => this.#byName.has(name));
        await Promise.all(needs.map((name) => this.#start(this.#byName.get(name)!)));
        if (this.#stopping) throw new Error(`${unit.name} not started: the platform is stopping`);
        const announce = unit.metricsUrl !== undefined ? serviceListening(unit.name) : unit.env.WORKER_PORT !== undefined ? workerListening : standInListening;
        const launched = launch(unit.script, unit.args, this.#environment(unit), announce, this.#keep);
        this.#children.set(unit.name, launched.child);
        launched.child.once('exit', (code, signal) => this.#keep(`${unit.name} exited (${signal ?? code})`));
        const found = await launched.announced;
        this.addresses.set(unit.name, found);
        return found;
      })();
      this.#started.set(unit.name, address);
    }
    return address;
  }

  /** What a process is given: the plan's, with the addresses learned so far, and port 0 unless its port was picked. */
  #environment(unit: Unit): NodeJS.ProcessEnv {
    const learned: NodeJS.ProcessEnv = {};
    for (const [name, address] of this.addresses) {
      if (name in DEFAULT_PORTS) learned[`${name.toUpperCase()}_URL`] = address.url;
      if (name === 'stripe-stand-in') learned.STRIPE_API_URL = address.url;
    }
    const port = PICKED.includes(unit.name) ? unit.env.PORT : '0';
    const own =
      unit.metricsUrl !== undefined
        ? { PORT: port, METRICS_PORT: '0' }
        : unit.env.WORKER_PORT !== undefined
          ? { WORKER_PORT: '0' }
          : { STRIPE_STAND_IN_PORT: '0' };
    return { ...this.#env, ...learned, ...unit.env, ...own };
  }
}

/**
 * The platform as `npm start` runs it (its plan: the same processes, environment and development keys), on
 * ports of its own and a data directory of its own, so a test never meets a platform a developer runs.
 * `shared` gives it the test's PostgreSQL (a fresh database) and Redis, which runs the workers as processes
 * too; `env` adds or overrides variables.
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
  for (const service of PICKED) env[`${service.toUpperCase()}_PORT`] = String(await freePort());
  Object.assign(env, options.env);
  const { env: planned, units } = plan(env);
  let said = '';
  // Every process logs at info at least, which is where it says it listens; what is kept is what LOG_LEVEL shows.
  const keep = shownAt(planned.LOG_LEVEL!, (line) => (said += `${line}\n`));
  if ((LEVELS[planned.LOG_LEVEL!] ?? LEVELS.info!) > LEVELS.info!) planned.LOG_LEVEL = 'info';
  const processes = new Processes(units, planned, keep);

  try {
    // Services first (the graph seeds its database), then the workers that share it.
    const workers = units.filter((unit) => unit.env.WORKER_PORT !== undefined);
    await processes.serving(units.filter((unit) => !workers.includes(unit)));
    await processes.serving(workers);
  } catch (error) {
    await processes.stop();
    rmSync(dataDir, { recursive: true, force: true });
    throw new Error(`the platform did not start: ${(error as Error).message}\n${said.slice(-4000)}`);
  }
  const urls = {} as Record<ServiceName, string>;
  const metricsUrls = {} as Record<ServiceName, string>;
  const workers: Record<string, string> = {};
  for (const unit of units) {
    const { url, metricsUrl } = processes.addresses.get(unit.name)!;
    if (metricsUrl !== undefined) [urls[unit.name as ServiceName], metricsUrls[unit.name as ServiceName]] = [url, metricsUrl];
    else if (unit.env.WORKER_PORT !== undefined) workers[unit.name] = `${url}/metrics`;
  }
  return {
    urls,
    metricsUrls,
    workers,
    stripe: processes.addresses.get('stripe-stand-in')?.url ?? planned.STRIPE_API_URL!,
    output: () => said,
    async stop() {
      await processes.stop();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
