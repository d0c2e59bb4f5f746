import proxyAddr from 'proxy-addr';
import { z } from 'zod';

/** Raised when the environment does not satisfy a service's schema; `main` prints it and exits 1. */
export class ConfigError extends Error {
  override name = 'ConfigError';
}

export const csv = z
  .string()
  .optional()
  .transform((value) =>
    (value ?? '')
      .split(',')
      .map((part) => part.trim())
      .filter(Boolean),
  );

export const optionalString = z
  .string()
  .optional()
  .transform((value) => (value && value.trim() !== '' ? value.trim() : undefined));

export const DEFAULT_PORTS = {
  gateway: 8080,
  generation: 8081,
  graph: 8082,
  simulation: 8083,
  conductor: 8084,
  billing: 8085,
} as const;
export type ServiceName = keyof typeof DEFAULT_PORTS;

const peerUrl = (service: ServiceName) => z.url().default(`http://127.0.0.1:${DEFAULT_PORTS[service]}`);

/** The variables every service shares (conventions.md, "Environment"). */
export function baseConfigSchema(service: ServiceName) {
  return z.object({
    PORT: z.coerce.number().int().min(0).max(65535).default(DEFAULT_PORTS[service]),
    /** Where /metrics is served, apart from the API port an Ingress routes; unset, PORT + 1000 (metricsPort). */
    METRICS_PORT: z.coerce.number().int().min(0).max(65535).optional(),
    HOST: z.string().default('0.0.0.0'),
    DATABASE_URL: optionalString.pipe(z.url().optional()),
    TEMPORA_DATA_DIR: z.string().default('./.tempora'),
    REDIS_URL: optionalString.pipe(z.url().optional()),
    /** Namespaces every Redis key, so environments can share one Redis. */
    REDIS_KEY_PREFIX: z
      .string()
      .regex(/^[A-Za-z0-9:_-]+$/)
      .default('tempora'),
    SERVICE_KEY: csv,
    ADMIN_KEY: optionalString,
    LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
    TEMPORA_DOMAIN: optionalString,
    BODY_LIMIT: z
      .string()
      .regex(/^\d+(b|kb|mb)$/i, 'a size such as 1mb or 512kb')
      .default('1mb'),
    SHUTDOWN_GRACE_MS: z.coerce.number().int().min(0).default(10_000),
    /**
     * The proxies (addresses or CIDRs, comma-separated; none by default) whose X-Forwarded-For entries
     * are believed: the client address is the first one, walking the peer and then the entries from the
     * right, that is not among them (createClientAddress). With none, X-Forwarded-For is ignored.
     */
    TRUSTED_PROXIES: csv.superRefine((entries, ctx) => {
      for (const entry of entries) {
        try {
          proxyAddr.compile(entry);
        } catch {
          ctx.addIssue({ code: 'custom', message: `"${entry}" is neither an IP address nor a CIDR range` });
        }
      }
    }),
    /** At most this many TRUSTED_PROXIES are walked through (an ingress, then the gateway: 2). */
    TRUSTED_PROXY_HOPS: z.coerce.number().int().min(0).max(10).default(1),
    GATEWAY_URL: peerUrl('gateway'),
    GENERATION_URL: peerUrl('generation'),
    GRAPH_URL: peerUrl('graph'),
    SIMULATION_URL: peerUrl('simulation'),
    CONDUCTOR_URL: peerUrl('conductor'),
    BILLING_URL: peerUrl('billing'),
  });
}

/**
 * The port of a service's /metrics (conventions.md, "Ports"): METRICS_PORT, else PORT + 1000, so gateway
 * 8080 is scraped on 9080. A service on an ephemeral port (PORT 0) gets an ephemeral metrics port too.
 */
/** How far above PORT a service's /metrics listens unless METRICS_PORT says otherwise: the one place this is decided. */
export const METRICS_PORT_OFFSET = 1000;

export function metricsPort(config: { PORT: number; METRICS_PORT?: number | undefined }): number {
  if (config.METRICS_PORT !== undefined && config.METRICS_PORT !== 0 && config.METRICS_PORT === config.PORT)
    throw new ConfigError(`METRICS_PORT: ${config.METRICS_PORT} is PORT too; /metrics needs a port of its own`);
  if (config.METRICS_PORT !== undefined) return config.METRICS_PORT;
  if (config.PORT === 0) return 0;
  if (config.PORT + METRICS_PORT_OFFSET > 65535)
    throw new ConfigError(`METRICS_PORT: PORT ${config.PORT} + ${METRICS_PORT_OFFSET} is no port; set METRICS_PORT`);
  return config.PORT + METRICS_PORT_OFFSET;
}

/** Bytes in a size such as BODY_LIMIT's `1mb`, `512kb` or `100b`. */
export function sizeInBytes(size: string): number {
  const match = /^(\d+)(b|kb|mb)$/i.exec(size);
  if (!match) throw new Error(`not a size: ${size}`);
  const unit = match[2]!.toLowerCase();
  return Number(match[1]) * (unit === 'mb' ? 1_048_576 : unit === 'kb' ? 1024 : 1);
}

/** Parses `env` with `schema`; every problem is named by its variable so the operator can fix them all at once. */
export function loadConfig<S extends z.ZodType>(schema: S, env: NodeJS.ProcessEnv = process.env): z.output<S> {
  const result = schema.safeParse(env);
  if (result.success) return result.data;
  const lines = result.error.issues.map((issue) => `  ${issue.path.join('.') || '(environment)'}: ${issue.message}`);
  throw new ConfigError(`invalid environment:\n${lines.join('\n')}`);
}

export type BaseConfig = z.output<ReturnType<typeof baseConfigSchema>>;
