/**
 * `npm start`: the whole platform on this machine. Every service that exists runs as its own process on
 * its conventional port, on embedded defaults (PGlite under TEMPORA_DATA_DIR, in-memory Redis fallbacks,
 * the offline model provider), with development keys for whatever is not configured; the graph's four
 * background workers (renderer, expander, judge, daily) run inside the graph service, which alone can open
 * the embedded database. Given DATABASE_URL and REDIS_URL it runs as a cluster does: the graph's renderer,
 * expander and judge as worker processes (daily, a CronJob's once-a-day run in a cluster, stays inside the
 * graph service), and generation's agents on the Redis agent pool with a pool worker. Everything listens
 * on loopback only unless HOST says otherwise. Ctrl-C stops all.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { DEFAULT_PORTS, METRICS_PORT_OFFSET, type ServiceName } from '../services/kit/src/runtime/config.ts';

const root = fileURLToPath(new URL('..', import.meta.url));
const ORDER: ServiceName[] = ['graph', 'generation', 'simulation', 'conductor', 'billing', 'gateway'];

const DEV_DEFAULTS: Record<string, string> = {
  SERVICE_KEY: 'dev-service-key',
  ADMIN_KEY: 'dev-admin-key',
  WRITER_TOKENS: 'dev:dev-writer-token',
  // Signs asynchronous generation results POSTed to a callback_url (generation refuses callbacks without it).
  CALLBACK_SECRET: 'dev-callback-secret',
  // Callbacks to this machine (a developer's receiver): refused anywhere else unless allow-listed (docs/reliability.md, "Who gets in").
  CALLBACK_ALLOWLIST: '127.0.0.0/8,::1/128,localhost',
  // Demo sign-ins from this machine itself, so the README tour can run again and again (others keep 5 an hour).
  DEMO_SIGNINS_PER_HOUR_LOOPBACK: '1000',
  TEMPORA_DATA_DIR: `${root}.tempora`,
  TEMPORA_DOMAIN: 'localhost',
  LOG_LEVEL: 'info',
  // Every service, metrics port and worker listens on loopback only (conventions.md, "Ports"): set HOST
  // (0.0.0.0, or one address) to reach them from elsewhere.
  HOST: '127.0.0.1',
};

/** One process of the platform: a service, or a worker serving /health and /metrics on its WORKER_PORT. */
export interface Unit {
  name: string;
  script: string;
  args: string[];
  /** Where it answers on this machine (its port at HOST, or on loopback). */
  url: string;
  env: NodeJS.ProcessEnv;
  /** A service's metrics port (a worker serves /metrics at `url`). */
  metricsUrl?: string;
  /** What answers 200 once it is ready (default /health). */
  readyPath?: string;
}

export interface Plan {
  /** What every process is given (each unit's own `env` on top). */
  env: NodeJS.ProcessEnv;
  /** The development defaults that were applied, by name. */
  applied: string[];
  services: ServiceName[];
  units: Unit[];
  /** Where a service is reached on this machine. */
  url(service: ServiceName): string;
}

/** What `npm start` runs given the environment `base`, and with what: nothing is started. */
export function plan(base: NodeJS.ProcessEnv): Plan {
  const env: NodeJS.ProcessEnv = { ...base };
  const applied: string[] = [];
  for (const [name, value] of Object.entries(DEV_DEFAULTS)) {
    if (!env[name]) {
      env[name] = value;
      applied.push(name);
    }
  }
  // Each service listens on <SERVICE>_PORT when set (a second platform beside the first, the tour's test),
  // else its conventional port, and reaches its peers there unless told otherwise: at HOST itself when it
  // names one address, on loopback when it names all of them.
  const portOf = (service: ServiceName) => Number(env[`${service.toUpperCase()}_PORT`] ?? DEFAULT_PORTS[service]);
  // /metrics on a port of its own (conventions.md, "Ports"): <SERVICE>_METRICS_PORT, else the port + 1000.
  const metricsPortOf = (service: ServiceName) => Number(env[`${service.toUpperCase()}_METRICS_PORT`] ?? portOf(service) + METRICS_PORT_OFFSET);
  const host = ['0.0.0.0', '::'].includes(env.HOST!) ? '127.0.0.1' : env.HOST!.includes(':') ? `[${env.HOST}]` : env.HOST!;
  const url = (service: ServiceName) => `http://${host}:${portOf(service)}`;
  for (const service of ORDER) env[`${service.toUpperCase()}_URL`] ??= url(service);
  // Links the platform hands out (scene images) point at the public host, as in a cluster.
  env.PUBLIC_URL ??= url('gateway');

  const services = ORDER.filter((service) => existsSync(`${root}services/${service}/src/main.ts`));
  const units: Unit[] = [];
  // Without Stripe keys, billing sells in test mode against the local Stripe stand-in (which listens on
  // loopback only, whatever HOST says), whose webhooks reach billing through the gateway as Stripe's would.
  if (services.includes('billing') && !env.STRIPE_SECRET_KEY) {
    const port = Number(env.STRIPE_STAND_IN_PORT ?? 12111);
    Object.assign(env, {
      STRIPE_SECRET_KEY: 'sk_test_tempora_dev',
      STRIPE_API_URL: `http://127.0.0.1:${port}`,
      STRIPE_WEBHOOK_SECRET: env.STRIPE_WEBHOOK_SECRET ?? 'whsec_tempora_dev',
      CHECKOUT_SUCCESS_URL: env.CHECKOUT_SUCCESS_URL ?? `${url('gateway')}/docs?checkout=success&session={CHECKOUT_SESSION_ID}`,
      CHECKOUT_CANCEL_URL: env.CHECKOUT_CANCEL_URL ?? `${url('gateway')}/docs?checkout=cancelled`,
    });
    units.push({
      name: 'stripe-stand-in',
      script: 'test/support/stand-ins/stripe.ts',
      args: [],
      url: env.STRIPE_API_URL!,
      env: { STRIPE_STAND_IN_PORT: String(port), STRIPE_WEBHOOK_URL: `${url('gateway')}/api/v1/billing/webhooks/stripe` },
      readyPath: '/_stand_in/events',
    });
  }
  // The services behind the gateway believe its X-Forwarded-For (it reaches them from this machine), so the
  // graph's per-address limits see the client; the gateway believes no one unless TRUSTED_PROXIES says so.
  const gatewayAddresses = ['127.0.0.0/8', '::1', ...(['0.0.0.0', '::', '127.0.0.1'].includes(env.HOST!) ? [] : [env.HOST!])].join(',');
  for (const service of services) {
    const own = service === 'gateway' ? {} : { TRUSTED_PROXIES: gatewayAddresses };
    units.push({
      name: service,
      script: `services/${service}/src/main.ts`,
      args: [],
      url: url(service),
      metricsUrl: `http://${host}:${metricsPortOf(service)}`,
      env: { PORT: String(portOf(service)), METRICS_PORT: String(metricsPortOf(service)), ...own },
    });
  }
  // Workers listen from WORKER_BASE_PORT (8100) up, in this order.
  let workerPort = Number(env.WORKER_BASE_PORT ?? 8100);
  const worker = (name: string, script: string, args: string[]): Unit => ({
    name,
    script,
    args,
    url: `http://${host}:${workerPort}`,
    env: { WORKER_PORT: String(workerPort++) },
  });
  if (env.DATABASE_URL) {
    // On the embedded database the graph service runs every worker itself (GRAPH_WORKERS' default); with
    // PostgreSQL the continuous ones are processes, and daily, which a CronJob runs once a day, stays inside it.
    for (const role of ['renderer', 'expander', 'judge']) units.push(worker(`graph-${role}`, 'services/graph/src/worker.ts', [role]));
    env.GRAPH_WORKERS ??= 'daily';
  }
  if (env.REDIS_URL) {
    env.AGENT_POOL ??= 'redis';
    if (env.AGENT_POOL === 'redis') units.push(worker('generation-worker', 'services/generation/src/worker.ts', []));
  }
  return { env, applied, services, units, url };
}

/** Starts every unit of the plan, services before workers, and stops them all on Ctrl-C or when one exits. */
async function run(started: Plan): Promise<void> {
  const { env, units } = started;
  const supervisor = new Supervisor(env);
  process.on('SIGINT', () => supervisor.stopAll(0));
  process.on('SIGTERM', () => supervisor.stopAll(0));

  const workers = units.filter((unit) => unit.env.WORKER_PORT !== undefined);
  console.log(
    `starting ${units.map((unit) => unit.name).join(', ')} (the first start seeds the graph into ${env.DATABASE_URL ? 'the database' : env.TEMPORA_DATA_DIR}; it takes a minute)…`,
  );
  // Services first (the graph seeds its database), then the workers that share it.
  for (const group of [units.filter((unit) => !workers.includes(unit)), workers]) {
    for (const unit of group) supervisor.launch(unit);
    for (const unit of group) {
      if (!(await supervisor.healthy(unit, 300_000))) {
        if (!supervisor.stopping) {
          console.error(`${unit.name} did not answer ${unit.url}${unit.readyPath ?? '/health'} within 5 minutes; stopping the platform`);
          supervisor.stopAll(1);
        }
        break;
      }
    }
  }
  if (!supervisor.stopping) printRunning(started, workers);
}

/** The platform's processes: launched with the plan's environment, and all stopped as soon as one exits. */
class Supervisor {
  private readonly children = new Map<string, ChildProcess>();
  private readonly env: NodeJS.ProcessEnv;
  stopping = false;

  constructor(env: NodeJS.ProcessEnv) {
    this.env = env;
  }

  stopAll(code: number): void {
    if (this.stopping) return;
    this.stopping = true;
    console.log('\nstopping the platform…');
    for (const child of this.children.values()) if (child.exitCode === null) child.kill('SIGTERM');
    const force = setTimeout(() => {
      for (const child of this.children.values()) if (child.exitCode === null) child.kill('SIGKILL');
    }, 15_000);
    force.unref();
    void Promise.all(
      [...this.children.values()].map((child) => (child.exitCode === null ? new Promise((resolve) => child.once('exit', resolve)) : undefined)),
    ).then(() => process.exit(code));
  }

  async healthy(unit: Unit, timeoutMs: number): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline && !this.stopping) {
      const ok = await fetch(`${unit.url}${unit.readyPath ?? '/health'}`).then(
        (r) => r.ok,
        () => false,
      );
      if (ok) return true;
      if (this.children.get(unit.name)?.exitCode !== null) return false;
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    return false;
  }

  launch(unit: Unit): void {
    const child = spawn(process.execPath, [unit.script, ...unit.args], {
      cwd: root,
      env: { ...this.env, ...unit.env },
      stdio: ['ignore', 'inherit', 'inherit'],
    });
    this.children.set(unit.name, child);
    child.once('exit', (code, signal) => {
      if (!this.stopping) {
        console.error(`${unit.name} exited (${signal ?? code}); stopping the platform`);
        this.stopAll(1);
      }
    });
  }
}

/** Where everything answers once it is up, and the development credentials that were made up. */
function printRunning({ env, applied, services, units, url }: Plan, workers: Unit[]): void {
  console.log('\nTempora is running:');
  for (const unit of units)
    if (unit.metricsUrl) console.log(`  ${unit.name.padEnd(17)} ${unit.url}   docs ${unit.url}/docs   metrics ${unit.metricsUrl}/metrics`);
  if (services.includes('graph')) {
    // The public host's address first: free read tools with no credential, as a consumer's client meets them.
    if (services.includes('gateway'))
      console.log(`  ${'MCP'.padEnd(17)} ${url('gateway')}/api/v1/graph/mcp   (the graph's, on the public host; also ${url('graph')}/mcp/)`);
    else console.log(`  ${'MCP'.padEnd(17)} ${url('graph')}/mcp/`);
  }
  for (const unit of workers) console.log(`  ${unit.name.padEnd(17)} ${unit.url}/metrics`);
  if (units.some((unit) => unit.name === 'stripe-stand-in'))
    console.log(`  ${'Stripe stand-in'.padEnd(17)} ${env.STRIPE_API_URL}   (billing in test mode: no real payments)`);
  if (services.includes('graph')) {
    const inside = env.GRAPH_WORKERS ?? 'renderer,expander,judge,daily';
    console.log(
      `  (graph workers inside the graph service: ${inside === 'none' ? 'none' : inside.split(',').join(', ')}${env.DATABASE_URL ? '' : ', on the embedded database; set DATABASE_URL and REDIS_URL to run them as processes'})`,
    );
    if (!env.GEMINI_API_KEY && !env.OPENROUTER_API_KEY && !env.OPENROUTER_BASE_URL) {
      console.log(
        "  (no model key: every model is the offline provider; the Expander's metadata and proposals are labelled placeholders, the Daily job draws real events from its curated set, and the Judge refuses only plain spam)",
      );
    }
  }
  if (applied.length > 0) {
    console.log('\ndevelopment credentials (set these variables to use your own):');
    for (const name of applied.filter((name) => /KEY|TOKENS|SECRET/.test(name))) console.log(`  ${name}=${env[name]}`);
  }
  console.log('\nCtrl-C stops everything.');
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) await run(plan(process.env));
