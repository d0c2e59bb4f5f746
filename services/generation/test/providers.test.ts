import assert from 'node:assert/strict';
import {
  GeminiProvider,
  OfflineProvider,
  OpenRouterProvider,
  PollinationsProvider,
  type ProviderError,
  retryAfterMs,
  StabilityProvider,
} from '@tempora/kit/providers';
import { FakeVendors } from '../../../test/support/stand-ins/model-vendors.ts';
import { PNG } from '../../../test/support/stand-ins/recorded-replies.ts';

const http = { timeoutMs: 500, retries: 2, backoffMs: 5, maxBackoffMs: 3000 };
const system = 'You are the Scene agent. Describe.';

describe('generation: model providers (kit/providers) against local vendor servers', () => {
  const fake = new FakeVendors();
  before(() => fake.start());
  after(() => fake.stop());
  beforeEach(() => fake.reset());

  it('native: speaks generateContent with system instruction, sampling, thinking level, key header; counts tokens and skips thoughts', async () => {
    const native = new GeminiProvider({ ...http, apiKey: 'k1', baseUrl: fake.url });
    const result = await native.generateText({
      model: 'gemini-2.5-flash',
      system,
      prompt: 'Query: x',
      json: true,
      params: { temperature: 0.3, max_tokens: 99, top_p: 0.9, top_k: 5, stop: ['END'], thinking_level: 'high', frequency_penalty: 1, repetition_penalty: 1.1 },
    });
    const [call] = fake.of('native');
    assert.equal(call!.path, '/v1beta/models/gemini-2.5-flash:generateContent');
    assert.equal(call!.headers['x-goog-api-key'], 'k1');
    assert.equal(call!.body.systemInstruction.parts[0].text, system);
    assert.deepEqual(call!.body.generationConfig, {
      temperature: 0.3,
      maxOutputTokens: 99,
      topP: 0.9,
      topK: 5,
      stopSequences: ['END'],
      responseMimeType: 'application/json',
      thinkingConfig: { thinkingLevel: 'high' },
    });
    assert.ok(!JSON.stringify(call!.body).includes('penalty'), 'aggregator-only parameters are not sent to the native provider');
    assert.deepEqual(result.dropped_params, ['frequency_penalty', 'repetition_penalty']);
    assert.equal(JSON.parse(result.text).title, 'The Eagle Has Landed');
    assert.deepEqual(result.usage, { input_tokens: 100, output_tokens: 57, thinking_tokens: 7, total_tokens: 157 });
    assert.equal(result.provider, 'native');
  });

  it('native: thinking_level none turns thinking off; grounding adds google_search and returns citations', async () => {
    const native = new GeminiProvider({ ...http, apiKey: 'k1', baseUrl: fake.url });
    const result = await native.generateText({
      model: 'gemini-2.5-flash',
      system: 'You are the Grounding agent.',
      prompt: 'p',
      json: true,
      grounding: true,
      params: { thinking_level: 'none' },
    });
    const [call] = fake.of('native');
    assert.deepEqual(call!.body.generationConfig.thinkingConfig, { thinkingBudget: 0 });
    assert.deepEqual(call!.body.tools, [{ google_search: {} }]);
    assert.equal(call!.body.generationConfig.responseMimeType, undefined);
    assert.deepEqual(result.citations, [{ title: 'Apollo 11 - Wikipedia', url: 'https://en.wikipedia.org/wiki/Apollo_11' }]);
  });

  it('aggregator: speaks chat completions with bearer key, penalties and JSON mode; never sends thinking_level', async () => {
    const aggregator = new OpenRouterProvider({ ...http, apiKey: 'or-key', baseUrl: `${fake.url}/api/v1` });
    const result = await aggregator.generateText({
      model: 'meta-llama/llama-3.3-70b-instruct',
      system,
      prompt: 'Query: x',
      json: true,
      params: {
        temperature: 1.5,
        max_tokens: 10,
        top_p: 0.5,
        top_k: 3,
        frequency_penalty: -2,
        presence_penalty: 2,
        repetition_penalty: 0.5,
        stop: ['a', 'b'],
        thinking_level: 'low',
      },
    });
    const [call] = fake.of('aggregator');
    assert.equal(call!.path, '/api/v1/chat/completions');
    assert.equal(call!.headers.authorization, 'Bearer or-key');
    assert.deepEqual(call!.body.messages, [
      { role: 'system', content: system },
      { role: 'user', content: 'Query: x' },
    ]);
    for (const [name, value] of Object.entries({
      temperature: 1.5,
      max_tokens: 10,
      top_p: 0.5,
      top_k: 3,
      frequency_penalty: -2,
      presence_penalty: 2,
      repetition_penalty: 0.5,
    }))
      assert.equal(call!.body[name], value, name);
    assert.deepEqual(call!.body.stop, ['a', 'b']);
    assert.deepEqual(call!.body.response_format, { type: 'json_object' });
    assert.equal(call!.body.thinking_level, undefined);
    assert.deepEqual(result.dropped_params, ['thinking_level']);
    assert.deepEqual(result.usage, { input_tokens: 80, output_tokens: 40, thinking_tokens: 0, total_tokens: 120 });
  });

  it('a local OpenAI-compatible server works as the aggregator without a key', async () => {
    const local = new OpenRouterProvider({ ...http, baseUrl: `${fake.url}/v1` });
    await local.generateText({ model: 'local/qwen', system, prompt: 'p' });
    assert.equal(fake.of('aggregator')[0]!.headers.authorization, undefined);
  });

  it('retries 429 honouring Retry-After, and 5xx, then succeeds', async () => {
    fake.fail('aggregator', 'Scene', { kind: 'status', status: 429, retryAfter: '1' }, { kind: 'status', status: 503 });
    const aggregator = new OpenRouterProvider({ ...http, apiKey: 'k', baseUrl: `${fake.url}/api/v1` });
    const started = Date.now();
    const result = await aggregator.generateText({ model: 'a/b', system, prompt: 'p' });
    const calls = fake.of('aggregator');
    assert.equal(calls.length, 3);
    assert.ok(calls[1]!.at - calls[0]!.at >= 950, `waited ${calls[1]!.at - calls[0]!.at} ms after Retry-After: 1`);
    assert.ok(Date.now() - started < 2500);
    assert.equal(JSON.parse(result.text).title, 'The Eagle Has Landed');
  });

  it('gives up after the retry budget with the upstream status; other 4xx fail at once', async () => {
    fake.fail('native', 'Scene', { kind: 'status', status: 500 }, { kind: 'status', status: 502 }, { kind: 'status', status: 503 });
    const native = new GeminiProvider({ ...http, apiKey: 'k', baseUrl: fake.url });
    await assert.rejects(
      native.generateText({ model: 'gemini-x', system, prompt: 'p' }),
      (error: ProviderError) => error.code === 'http' && error.status === 503 && error.attempts === 3,
    );
    fake.reset();
    fake.fail('native', 'Scene', { kind: 'status', status: 400 });
    await assert.rejects(
      native.generateText({ model: 'gemini-x', system, prompt: 'p' }),
      (error: ProviderError) => error.status === 400 && error.attempts === 1,
    );
    assert.equal(fake.of('native').length, 1);
  });

  it('times out a call that hangs, retrying within the budget', async () => {
    fake.fail('native', 'Scene', { kind: 'hang' }, { kind: 'hang' }, { kind: 'hang' });
    const native = new GeminiProvider({ ...http, timeoutMs: 150, apiKey: 'k', baseUrl: fake.url });
    await assert.rejects(
      native.generateText({ model: 'gemini-x', system, prompt: 'p' }),
      (error: ProviderError) => error.code === 'timeout' && error.attempts === 3,
    );
    fake.reset();
    fake.fail('native', 'Scene', { kind: 'hang' });
    const result = await native.generateText({ model: 'gemini-x', system, prompt: 'p' });
    assert.equal(JSON.parse(result.text).mood, 'tense then euphoric');
  });

  it('retries a reply that is not JSON; reports malformed when it persists', async () => {
    fake.fail('native', 'Scene', { kind: 'malformed' });
    const native = new GeminiProvider({ ...http, apiKey: 'k', baseUrl: fake.url });
    await native.generateText({ model: 'gemini-x', system, prompt: 'p' });
    assert.equal(fake.of('native').length, 2);
    fake.reset();
    fake.fail('native', 'Scene', { kind: 'malformed' }, { kind: 'malformed' }, { kind: 'malformed' });
    await assert.rejects(native.generateText({ model: 'gemini-x', system, prompt: 'p' }), (error: ProviderError) => error.code === 'malformed');
  });

  /** A 200 whose body is JSON, of another shape than the vendor's protocol. */
  const reshaped = (value: unknown) => ({ kind: 'status' as const, status: 200, body: JSON.stringify(value) });
  /** Malformed on the first reply (asking again would get the same), naming where the reply differs. */
  const malformedAt = (where: RegExp) => (error: ProviderError) => error.code === 'malformed' && error.attempts === 1 && where.test(error.message);

  it('native: a reply of another shape is malformed at once, naming where', async () => {
    fake.fail('native', 'Scene', reshaped({ candidates: [{ content: { parts: [null] } }], usageMetadata: { totalTokenCount: 'many' } }));
    const native = new GeminiProvider({ ...http, apiKey: 'k', baseUrl: fake.url });
    await assert.rejects(
      native.generateText({ model: 'gemini-x', system, prompt: 'p' }),
      malformedAt(/^native sent a reply of another shape: candidates\.0\.content\.parts\.0: Invalid input: expected object, received null \(and 1 more\)$/),
    );
    assert.equal(fake.of('native').length, 1);
  });

  it('aggregator: a reply of another shape is malformed at once, naming where', async () => {
    fake.fail('aggregator', 'Scene', reshaped({ choices: [{ message: { role: 'assistant', content: 42 } }] }));
    const aggregator = new OpenRouterProvider({ ...http, apiKey: 'k', baseUrl: `${fake.url}/api/v1` });
    await assert.rejects(aggregator.generateText({ model: 'a/b', system, prompt: 'p' }), malformedAt(/: choices\.0\.message\.content: Invalid input/));
    assert.equal(fake.of('aggregator').length, 1);
  });

  it('image vendor: a reply of another shape is malformed at once, naming where', async () => {
    fake.fail('image_vendor', 'ImageGen', reshaped({ image: 42, finish_reason: 'SUCCESS' }));
    const vendor = new StabilityProvider({ ...http, apiKey: 'st', baseUrl: fake.url });
    await assert.rejects(
      vendor.generateImage({ model: 'stability/sd3.5-large', prompt: 'a scene' }),
      malformedAt(/: image: Invalid input: expected string, received number$/),
    );
    assert.equal(fake.of('image_vendor').length, 1);
  });

  it('a cancelled call stops at once', async () => {
    fake.fail('native', 'Scene', { kind: 'hang' });
    const native = new GeminiProvider({ ...http, timeoutMs: 5000, apiKey: 'k', baseUrl: fake.url });
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 50);
    const started = Date.now();
    await assert.rejects(
      native.generateText({ model: 'gemini-x', system, prompt: 'p', signal: controller.signal }),
      (error: ProviderError) => error.code === 'cancelled',
    );
    assert.ok(Date.now() - started < 1000);
  });

  it('image vendor: multipart SD3 request with the vendor model name; native and aggregator images; free generator bytes', async () => {
    const vendor = new StabilityProvider({ ...http, apiKey: 'st', baseUrl: fake.url });
    const image = await vendor.generateImage({ model: 'stability/sd3.5-large', prompt: 'a scene', negative_prompt: 'modern', aspect_ratio: '16:9', seed: 7 });
    const [call] = fake.of('image_vendor');
    assert.equal(call!.headers.authorization, 'Bearer st');
    assert.deepEqual(call!.form, { prompt: 'a scene', model: 'sd3.5-large', output_format: 'png', aspect_ratio: '16:9', seed: '7', negative_prompt: 'modern' });
    assert.deepEqual(image.data, PNG);
    assert.equal(image.model, 'stability/sd3.5-large');
    await assert.rejects(vendor.generateImage({ model: 'stability/sdxl', prompt: 'x' }), (error: ProviderError) => error.code === 'refused');

    const native = await new GeminiProvider({ ...http, apiKey: 'k', baseUrl: fake.url }).generateImage({ model: 'gemini-2.5-flash-image', prompt: 'x' });
    assert.deepEqual(native.data, PNG);
    const aggregated = await new OpenRouterProvider({ ...http, apiKey: 'k', baseUrl: `${fake.url}/api/v1` }).generateImage({
      model: 'google/gemini-2.5-flash-image',
      prompt: 'x',
    });
    assert.deepEqual(aggregated.data, PNG);
    const free = await new PollinationsProvider({ ...http, baseUrl: fake.url }).generateImage({ model: 'pollinations', prompt: 'a b', seed: 3 });
    assert.equal(free.mime_type, 'image/jpeg');
    assert.match(fake.of('free_image')[0]!.path, /^\/prompt\/a%20b\?width=1344&height=768&nologo=true&model=flux&seed=3$/);
  });

  it('offline: deterministic, marked offline, no network', async () => {
    const offline = new OfflineProvider();
    const a = await offline.generateText({ model: 'x', system: 's', prompt: 'p', json: true, synthesize: () => ({ ok: 1 }) });
    assert.equal(a.text, '{"ok":1}');
    assert.equal(a.provider, 'offline');
    const one = await offline.generateImage({ model: 'offline', prompt: 'Rome burns' });
    const two = await offline.generateImage({ model: 'offline', prompt: 'Rome burns' });
    assert.deepEqual(one.data, two.data);
    assert.equal(one.mime_type, 'image/svg+xml');
  });

  it('reads Retry-After as seconds or an HTTP date', () => {
    assert.equal(retryAfterMs('2'), 2000);
    assert.equal(retryAfterMs(new Date(Date.now() + 3000).toUTCString(), Date.now())! > 1000, true);
    assert.equal(retryAfterMs('soon'), undefined);
    assert.equal(retryAfterMs(null), undefined);
  });
});
