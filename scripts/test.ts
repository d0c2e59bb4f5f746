/**
 * `npm test`: type-checks the project and checks its style and dead code (`npm run lint`), starts
 * PostgreSQL and Redis unless DATABASE_URL / REDIS_URL are set, runs every mocha suite against them, and
 * stops what it started, whatever the outcome. A failed check stops it before any suite runs.
 * Extra arguments go to mocha (e.g. `npm test -- --grep traverse`).
 */
import { spawn } from 'node:child_process';
import { startInfra } from './infra.ts';

function run(command: string, args: string[], env: NodeJS.ProcessEnv): Promise<number> {
  return new Promise((resolve) => {
    const child = spawn(command, args, { stdio: 'inherit', env });
    child.once('exit', (code, signal) => resolve(code ?? (signal ? 1 : 0)));
  });
}

// `npm run lint`, so that the two refuse the same: tsc, then Biome (lint, format, import order), then knip.
const lint = await run('npm', ['run', '--silent', 'lint'], process.env);
if (lint !== 0) {
  console.error('npm run lint failed (a style finding is fixed by `npx biome check --write`)');
  process.exit(lint);
}

const infra = await startInfra();
let code = 1;
const stop = async () => {
  await infra.stop();
};
process.once('SIGINT', () => void stop().then(() => process.exit(130)));
process.once('SIGTERM', () => void stop().then(() => process.exit(143)));
try {
  code = await run('mocha', process.argv.slice(2), { ...process.env, ...infra.env, LOG_LEVEL: process.env.LOG_LEVEL ?? 'silent' });
} finally {
  await stop();
}
process.exit(code);
