// Entry point: `node operator/src/main.ts`. Exits 1 on invalid environment or lost leadership (the
// Deployment restarts it as a candidate), 0 after a graceful stop on SIGTERM/SIGINT.
import { KubeConfig } from '@kubernetes/client-node';
import { ConfigError, loadConfig, type OperatorConfig } from './config.ts';
import { createLogger } from './log.ts';
import { Operator } from './operator.ts';

let config: OperatorConfig;
try {
  config = loadConfig(process.env);
} catch (err) {
  if (!(err instanceof ConfigError)) throw err;
  process.stderr.write(`${err.message}\n`);
  process.exit(1);
}

const log = createLogger(config.logLevel, { identity: config.identity });
const kubeConfig = new KubeConfig();
if (config.kubeconfig) kubeConfig.loadFromFile(config.kubeconfig);
else kubeConfig.loadFromDefault();

const operator = new Operator({
  config,
  kubeConfig,
  log,
  onLostLeadership: () => {
    log.error('lost leadership; exiting so that this instance restarts as a candidate');
    process.exit(1);
  },
});

let stopping = false;
for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.on(signal, () => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'shutting down');
    const force = setTimeout(() => process.exit(1), 25_000);
    force.unref();
    operator.stop().then(
      () => process.exit(0),
      (err: unknown) => {
        log.error({ err: String(err) }, 'shutdown failed');
        process.exit(1);
      },
    );
  });
}

await operator.start();
log.info({ port: operator.port, leaderElection: config.leaderElection }, 'operator started');
