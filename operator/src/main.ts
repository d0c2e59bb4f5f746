// Entry point: `node operator/src/main.ts`. Exits 1 on invalid environment or lost leadership (the
// Deployment restarts it as a candidate), 0 after a graceful stop on SIGTERM/SIGINT.

import packageJson from '../package.json' with { type: 'json' };
import { ConfigError, loadConfig, type OperatorConfig } from './config.ts';
import { loadConnection } from './kube/connection.ts';
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

// A span per reconcile (controller.ts) goes where the standard OTEL_* variables say. The SDK costs
// memory even when it exports nothing, and the operator has no incoming requests to propagate a trace
// from, so it is loaded only when spans have somewhere to go.
const env = process.env;
const exporting = Boolean(
  env.OTEL_EXPORTER_OTLP_ENDPOINT || env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT || (env.OTEL_TRACES_EXPORTER && env.OTEL_TRACES_EXPORTER !== 'none'),
);
const tracing = exporting ? (await import('@tempora/kit/observability')).startTracing('operator', packageJson.version) : undefined;

const log = createLogger(config.logLevel, { identity: config.identity });

const operator = new Operator({
  config,
  connection: loadConnection(config.kubeconfig),
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
      async () => {
        await tracing?.shutdown();
        process.exit(0);
      },
      (err: unknown) => {
        log.error({ err: String(err) }, 'shutdown failed');
        process.exit(1);
      },
    );
  });
}

await operator.start();
log.info({ port: operator.port, leaderElection: config.leaderElection }, 'operator started');
