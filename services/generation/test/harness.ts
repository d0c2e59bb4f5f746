import { type StartedService, startService } from '../../../test/support/harness.ts';
import type { Reply } from '../../../test/support/http.ts';
import { userId } from '../../simulation/test/harness.ts';
import { GenerationServiceConfigSchema } from '../src/config.ts';
import { createGenerationService, type GenerationInstance } from '../src/service.ts';

export { userId };

import { FakeVendors } from '../../../test/support/stand-ins/model-vendors.ts';

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

export interface GenerationHarness extends StartedService<GenerationInstance> {
  prefix: string;
  send<T = any>(method: string, path: string, body?: unknown, headers?: Record<string, string>): Promise<Reply<T>>;
}

/**
 * A generation service in this process on a fresh database (or on `shared`, which its stop leaves in place,
 * for replicas of one deployment), its own Redis namespace and a free port.
 */
export async function startGeneration(env: Record<string, string> = {}, shared?: string): Promise<GenerationHarness> {
  const started = await startService({
    name: 'generation',
    schema: GenerationServiceConfigSchema,
    create: createGenerationService,
    graceMs: 1000,
    env: {
      ...(shared === undefined ? {} : { DATABASE_URL: shared }),
      SERVICE_KEY,
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
    },
  });
  return {
    ...started,
    prefix: started.redisPrefix,
    send: (method, path, body, headers) => started.call(method, path, { body, headers }),
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
    get server() {
      return current().server;
    },
    get databaseUrl() {
      return current().databaseUrl;
    },
    get redisPrefix() {
      return current().redisPrefix;
    },
    call: (method, path, init) => current().call(method, path, init),
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
