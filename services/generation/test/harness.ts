import { randomBytes } from 'node:crypto';
import { type RunningServer, serve } from '@tempora/kit/http';
import { createLogger } from '@tempora/kit/observability';
import { loadConfig } from '@tempora/kit/runtime';
import { createDatabase, dropDatabase } from '../../../test/support/database.ts';
import { request } from '../../../test/support/http.ts';
import { userId } from '../../simulation/test/harness.ts';
import { GenerationServiceConfigSchema } from '../src/config.ts';
import { createGenerationService, type GenerationInstance } from '../src/service.ts';

export { userId };

import { FakeVendors } from './providers/fake-vendors.ts';

export const SERVICE_KEY = 'gen-svc-test-key-0123456789';
export const serviceKey = { 'X-Service-Key': SERVICE_KEY };
/** A user as the gateway names them: X-User-ID beside its service key (the header alone is refused). */
export const user = (name: string) => ({ 'X-User-ID': userId(name), 'X-Service-Key': SERVICE_KEY });

/** Environment pointing every provider at the fake vendor servers. */
export function vendorEnv(
  fake: FakeVendors,
  which: Array<'native' | 'aggregator' | 'image_vendor' | 'free_image'> = ['native', 'aggregator', 'image_vendor', 'free_image'],
): Record<string, string> {
  const env: Record<string, string> = { FREE_IMAGE_ENABLED: 'false' };
  if (which.includes('native')) Object.assign(env, { GEMINI_API_KEY: 'test-gemini-key', GEMINI_BASE_URL: fake.url });
  if (which.includes('aggregator')) Object.assign(env, { OPENROUTER_API_KEY: 'test-openrouter-key', OPENROUTER_BASE_URL: `${fake.url}/api/v1` });
  if (which.includes('image_vendor')) Object.assign(env, { STABILITY_API_KEY: 'test-stability-key', STABILITY_BASE_URL: fake.url });
  if (which.includes('free_image')) Object.assign(env, { FREE_IMAGE_ENABLED: 'true', POLLINATIONS_BASE_URL: fake.url });
  return env;
}

export interface GenerationHarness {
  url: string;
  instance: GenerationInstance;
  prefix: string;
  /** Where its /metrics answers (METRICS_PORT). */
  metricsUrl: string;
  get<T = any>(path: string, headers?: Record<string, string>): ReturnType<typeof request<T>>;
  post<T = any>(path: string, body: unknown, headers?: Record<string, string>): ReturnType<typeof request<T>>;
  send<T = any>(method: string, path: string, body?: unknown, headers?: Record<string, string>): ReturnType<typeof request<T>>;
  stop(): Promise<void>;
}

/**
 * A generation service in this process on a fresh database (or on `shared`, which its stop leaves in place,
 * for replicas of one deployment), its own Redis namespace and a free port.
 */
export async function startGeneration(env: Record<string, string> = {}, shared?: string): Promise<GenerationHarness> {
  const database = shared ?? (await createDatabase('generation'));
  const prefix = `test-gen-${randomBytes(4).toString('hex')}`;
  const config = loadConfig(GenerationServiceConfigSchema, {
    DATABASE_URL: database,
    REDIS_URL: process.env.REDIS_URL,
    REDIS_KEY_PREFIX: prefix,
    SERVICE_KEY,
    LOG_LEVEL: 'silent',
    GRAPH_LOOKUP: 'false',
    FREE_IMAGE_ENABLED: 'false',
    PROVIDER_TIMEOUT_MS: '2000',
    PROVIDER_RETRIES: '2',
    PROVIDER_BACKOFF_MS: '10',
    PROVIDER_MAX_BACKOFF_MS: '2000',
    STREAM_HEARTBEAT_MS: '1000',
    CALLBACK_BACKOFF_MS: '20',
    CALLBACK_TIMEOUT_MS: '2000',
    ...env,
  });
  const instance = await createGenerationService(config, createLogger('generation', config.LOG_LEVEL));
  const server: RunningServer = await serve(instance.app, {
    port: 0,
    host: '127.0.0.1',
    logger: instance.logger,
    graceMs: 1000,
    onDrain: instance.drain,
    onClose: [instance.close],
    metrics: { port: 0, metrics: instance.metrics },
  });
  return {
    url: server.url,
    instance,
    prefix,
    metricsUrl: server.metricsUrl!,
    get: (path, headers) => request(server.url, path, { headers }),
    post: (path, body, headers) => request(server.url, path, { method: 'POST', body, headers }),
    send: (method, path, body, headers) => request(server.url, path, { method, body, headers }),
    async stop() {
      await server.close();
      if (!shared) await dropDatabase(database);
    },
  };
}

/**
 * For the enclosing describe: fake vendor servers and a generation service calling them (`env` on top of
 * vendorEnv), started before its tests and stopped after; the vendors' record and faults are cleared before
 * each test. `gen` stands for the service once started.
 */
export function fakeVendorSuite(env: Record<string, string> = {}): { fake: FakeVendors; gen: GenerationHarness } {
  const fake = new FakeVendors();
  let started: GenerationHarness | undefined;
  const current = (): GenerationHarness => {
    if (!started) throw new Error("the generation service starts in the suite's before hook");
    return started;
  };
  before(async () => {
    await fake.start();
    started = await startGeneration({ ...vendorEnv(fake), ...env });
  });
  after(async () => {
    await started?.stop();
    await fake.stop();
  });
  beforeEach(() => fake.reset());
  const gen: GenerationHarness = {
    get url() {
      return current().url;
    },
    get instance() {
      return current().instance;
    },
    get prefix() {
      return current().prefix;
    },
    get metricsUrl() {
      return current().metricsUrl;
    },
    get: (path, headers) => current().get(path, headers),
    post: (path, body, headers) => current().post(path, body, headers),
    send: (method, path, body, headers) => current().send(method, path, body, headers),
    stop: () => current().stop(),
  };
  return { fake, gen };
}

export interface SseEvent {
  event: string;
  data: any;
  at: number;
}

/** Reads an SSE response into events (and comment lines as `comment` events). */
export async function readSse(response: Response, onEvent?: (event: SseEvent) => boolean | void): Promise<SseEvent[]> {
  const events: SseEvent[] = [];
  const decoder = new TextDecoder();
  let buffer = '';
  const reader = response.body!.getReader();
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let split: number;
    while ((split = buffer.indexOf('\n\n')) >= 0) {
      const block = buffer.slice(0, split);
      buffer = buffer.slice(split + 2);
      let event = 'message';
      let data = '';
      for (const line of block.split('\n')) {
        if (line.startsWith(':')) event = 'comment';
        else if (line.startsWith('event: ')) event = line.slice(7);
        else if (line.startsWith('data: ')) data += line.slice(6);
      }
      const parsed: SseEvent = { event, data: data ? JSON.parse(data) : null, at: Date.now() };
      events.push(parsed);
      if (onEvent?.(parsed) === true) {
        await reader.cancel();
        return events;
      }
    }
  }
  return events;
}

export const QUERY = 'Apollo 11 lands on the Moon, July 20 1969';
export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export async function until<T>(probe: () => Promise<T | undefined | false>, timeoutMs = 10_000, everyMs = 25): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await sleep(everyMs);
  }
}
