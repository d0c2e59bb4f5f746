import { randomBytes } from 'node:crypto';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { type ExpressLane, type RunningServer, type ServeOptions, serve } from '@tempora/kit/http';
import { createLogger } from '@tempora/kit/observability';
import { loadConfig } from '@tempora/kit/runtime';
import type Koa from 'koa';
import type { z } from 'zod';
import { createDatabase, dropDatabase } from './database.ts';
import { type Reply, request } from './http.ts';

type Logger = ServeOptions['logger'];
type Metrics = NonNullable<ServeOptions['metrics']>['metrics'];

/** What every service's composition function hands back, as far as a test harness needs it. */
export interface ServiceInstance {
  app: Koa;
  logger: Logger;
  metrics: Metrics;
  drain(): void;
  close(): Promise<void>;
  express?: ExpressLane;
}

export interface CallInit {
  headers?: Record<string, string>;
  body?: unknown;
  raw?: string;
}

export interface StartedService<I> {
  url: string;
  /** Where its /metrics answers (METRICS_PORT). */
  metricsUrl: string;
  instance: I;
  server: RunningServer;
  /** Its database: a fresh one, the one it was given, or '' on the embedded database. */
  databaseUrl: string;
  /** Its own Redis key prefix, so its rate-limit windows, queues and streams meet no other test's. */
  redisPrefix: string;
  call<T = any>(method: string, path: string, init?: CallInit): Promise<Reply<T>>;
  get<T = any>(path: string, headers?: Record<string, string>): Promise<Reply<T>>;
  post<T = any>(path: string, body: unknown, headers?: Record<string, string>): Promise<Reply<T>>;
  /** Closes the server (its close hooks too) and drops the database it made; one it was given stays. */
  stop(): Promise<void>;
}

export interface ServiceOptions<S extends z.ZodType, I extends ServiceInstance> {
  /** The service's name: its logger's, and the prefix of its fresh database. */
  name: string;
  schema: S;
  create(config: z.output<S>, logger: Logger): Promise<I>;
  /**
   * Its environment, on top of the database, Redis and a silent log level. `DATABASE_URL` given here is used
   * and left in place by `stop` ('' runs the embedded database); without it the service gets a fresh database.
   */
  env?: Record<string, string | undefined>;
  /** How long its server waits for requests in flight on close. */
  graceMs: number;
  /** A logger of the test's own (one that keeps the lines), instead of the service's at its LOG_LEVEL. */
  logger?: Logger;
}

/**
 * A service in this process, as every service harness starts one: its config from `env`, a fresh database
 * and Redis namespace, its app and /metrics served on ports bound at once (listen on 0, never a port
 * picked first and bound later), and request helpers against it.
 */
export async function startService<S extends z.ZodType, I extends ServiceInstance>(options: ServiceOptions<S, I>): Promise<StartedService<I>> {
  const given = options.env?.DATABASE_URL;
  const databaseUrl = given ?? (await createDatabase(options.name));
  const redisPrefix = `test-${options.name}-${randomBytes(4).toString('hex')}`;
  const config = loadConfig(options.schema, {
    REDIS_URL: process.env.REDIS_URL,
    REDIS_KEY_PREFIX: redisPrefix,
    LOG_LEVEL: 'silent',
    ...options.env,
    DATABASE_URL: databaseUrl,
  });
  let server: RunningServer;
  try {
    const instance = await options.create(config, options.logger ?? createLogger(options.name, (config as { LOG_LEVEL: string }).LOG_LEVEL));
    server = await serve(instance.app, {
      port: 0,
      host: '127.0.0.1',
      logger: instance.logger,
      graceMs: options.graceMs,
      onDrain: instance.drain,
      onClose: [instance.close],
      ...(instance.express ? { express: instance.express } : {}),
      metrics: { port: 0, metrics: instance.metrics },
    });
    const call = <T = any>(method: string, path: string, init: CallInit = {}) => request<T>(server.url, path, { method, ...init });
    return {
      url: server.url,
      metricsUrl: server.metricsUrl!,
      instance,
      server,
      databaseUrl,
      redisPrefix,
      call,
      get: (path, headers) => call('GET', path, { headers }),
      post: (path, body, headers) => call('POST', path, { body, headers }),
      async stop() {
        await server.close();
        if (given === undefined) await dropDatabase(databaseUrl);
      },
    };
  } catch (error) {
    if (given === undefined) await dropDatabase(databaseUrl);
    throw error;
  }
}

/** A loopback address bound at once that relays each connection to whatever answers behind it now. */
export interface Relay {
  url: string;
  /** Where new connections go; undefined resets them, as a peer that is down would fail them. */
  to(target: string | undefined): void;
  stop(): Promise<void>;
}

/**
 * For peers that must stay at one address while what answers there stops and starts again (a gateway a
 * test takes down and brings back), or that must be named before they start (two services calling each
 * other): the address is the relay's, bound once, and never a port freed and bound again.
 */
export async function startRelay(): Promise<Relay> {
  let target: URL | undefined;
  const sockets = new Set<Socket>();
  const track = (socket: Socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  };
  const relay: Server = createServer((client) => {
    track(client);
    if (!target) {
      client.resetAndDestroy();
      return;
    }
    const upstream = connect(Number(target.port), target.hostname);
    track(upstream);
    upstream.on('error', () => client.resetAndDestroy());
    client.on('error', () => upstream.destroy());
    // Either side gone ends the other: a kept-alive connection never outlives what answered on it.
    upstream.on('close', () => client.destroy());
    client.on('close', () => upstream.destroy());
    client.pipe(upstream).pipe(client);
  });
  await new Promise<void>((resolve) => relay.listen(0, '127.0.0.1', resolve));
  const port = (relay.address() as { port: number }).port;
  return {
    url: `http://127.0.0.1:${port}`,
    to(url) {
      target = url === undefined ? undefined : new URL(url);
    },
    async stop() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => relay.close(() => resolve()));
    },
  };
}
