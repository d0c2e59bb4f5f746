/**
 * `npm start`: the whole platform on this machine. Every service that exists runs as its own process on
 * its conventional port, on embedded defaults (PGlite under TEMPORA_DATA_DIR, in-memory Redis fallbacks,
 * the offline model provider), with development keys for whatever is not configured. Ctrl-C stops all.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { DEFAULT_PORTS, type ServiceName } from '../services/kit/src/runtime/config.ts';

const root = fileURLToPath(new URL('..', import.meta.url));
const ORDER: ServiceName[] = ['graph', 'generation', 'simulation', 'conductor', 'billing', 'gateway'];

const DEV_DEFAULTS: Record<string, string> = {
  SERVICE_KEY: 'dev-service-key',
  ADMIN_KEY: 'dev-admin-key',
  WRITER_TOKENS: 'dev:dev-writer-token',
  TEMPORA_DATA_DIR: `${root}.tempora`,
  TEMPORA_DOMAIN: 'localhost',
  LOG_LEVEL: 'info',
  // The README's tour signs in as a new demo user on every run; from this machine it may run as often as it likes.
  DEMO_SIGNINS_PER_HOUR_LOOPBACK: '1000',
};

const env: NodeJS.ProcessEnv = { ...process.env };
const applied: string[] = [];
for (const [name, value] of Object.entries(DEV_DEFAULTS)) {
  if (!env[name]) {
    env[name] = value;
    applied.push(name);
  }
}
// Each service listens on <SERVICE>_PORT when set (a second platform beside the first, the tour's test),
// else its conventional port, and reaches its peers there unless told otherwise.
const portOf = (service: ServiceName) => Number(env[`${service.toUpperCase()}_PORT`] ?? DEFAULT_PORTS[service]);
const url = (service: ServiceName) => `http://127.0.0.1:${portOf(service)}`;
for (const service of ORDER) env[`${service.toUpperCase()}_URL`] ??= url(service);

const services = ORDER.filter((service) => existsSync(`${root}services/${service}/src/main.ts`));
const children = new Map<ServiceName, ChildProcess>();
let stopping = false;

function stopAll(code: number): void {
  if (stopping) return;
  stopping = true;
  console.log('\nstopping the platform…');
  for (const child of children.values()) if (child.exitCode === null) child.kill('SIGTERM');
  const force = setTimeout(() => {
    for (const child of children.values()) if (child.exitCode === null) child.kill('SIGKILL');
  }, 15_000);
  force.unref();
  void Promise.all([...children.values()].map((child) => (child.exitCode === null ? new Promise((resolve) => child.once('exit', resolve)) : undefined))).then(() => process.exit(code));
}

process.on('SIGINT', () => stopAll(0));
process.on('SIGTERM', () => stopAll(0));

async function healthy(service: ServiceName, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline && !stopping) {
    const ok = await fetch(`${url(service)}/health`).then((r) => r.ok, () => false);
    if (ok) return true;
    if (children.get(service)?.exitCode !== null) return false;
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  return false;
}

for (const service of services) {
  const child = spawn(process.execPath, [`services/${service}/src/main.ts`], {
    cwd: root,
    env: { ...env, PORT: String(portOf(service)) },
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  children.set(service, child);
  child.once('exit', (code, signal) => {
    if (!stopping) {
      console.error(`${service} exited (${signal ?? code}); stopping the platform`);
      stopAll(1);
    }
  });
}

console.log(`starting ${services.join(', ')} (the first start seeds the graph into ${env.TEMPORA_DATA_DIR}; it takes a minute)…`);
for (const service of services) {
  if (!(await healthy(service, 300_000))) {
    if (!stopping) stopAll(1);
    break;
  }
}
if (!stopping) {
  console.log('\nTempora is running:');
  for (const service of services) console.log(`  ${service.padEnd(11)} ${url(service)}   docs ${url(service)}/docs`);
  if (services.includes('graph')) console.log(`  MCP         ${url('graph')}/mcp/`);
  if (applied.length > 0) {
    console.log('\ndevelopment credentials (set these variables to use your own):');
    for (const name of applied.filter((name) => /KEY|TOKENS/.test(name))) console.log(`  ${name}=${env[name]}`);
  }
  console.log('\nCtrl-C stops everything.');
}
