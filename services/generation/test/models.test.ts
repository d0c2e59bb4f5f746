import assert from 'node:assert/strict';
import { loadConfig } from '@tempora/kit/runtime';
import { GenerationConfigSchema } from '../src/config.ts';
import { operatorDefaults, PRESET_MODELS, type SelectionDefaults, selectModels } from '../src/models.ts';
import { createProviders } from '../src/providers.ts';
import { GenerateRequestSchema } from '../src/schemas.ts';
import { fakeVendorSuite, QUERY } from './harness.ts';

const http = {
  PROVIDER_TIMEOUT_MS: 1000,
  PROVIDER_RETRIES: 0,
  PROVIDER_BACKOFF_MS: 1,
  PROVIDER_MAX_BACKOFF_MS: 1,
  GEMINI_BASE_URL: 'http://x',
  STABILITY_BASE_URL: 'http://x',
  POLLINATIONS_BASE_URL: 'http://x',
  OPENROUTER_BASE_URL: undefined as string | undefined,
};
const all = createProviders({ ...http, GEMINI_API_KEY: 'g', OPENROUTER_API_KEY: 'o', STABILITY_API_KEY: 's', FREE_IMAGE_ENABLED: true });
const aggregatorOnly = createProviders({
  ...http,
  GEMINI_API_KEY: undefined,
  OPENROUTER_API_KEY: 'o',
  STABILITY_API_KEY: undefined,
  FREE_IMAGE_ENABLED: false,
});
const none = createProviders({ ...http, GEMINI_API_KEY: undefined, OPENROUTER_API_KEY: undefined, STABILITY_API_KEY: undefined, FREE_IMAGE_ENABLED: false });
const defaults: SelectionDefaults = { defaultTextModel: undefined, defaultImageModel: undefined, permissiveTextModel: 'meta-llama/llama-3.3-70b-instruct' };
const select = (body: Record<string, unknown>, providers = all, options = defaults) =>
  selectModels(GenerateRequestSchema.parse({ query: QUERY, generate_image: true, ...body }), providers, options);
const chain = (result: ReturnType<typeof select>) => result.selection!.images.map((choice) => choice.model);

describe('generation: model selection precedence', () => {
  it('server defaults: balanced on the native provider, then the aggregator, then offline', () => {
    assert.deepEqual(select({}).selection!.text, { provider: 'native', model: 'gemini-2.5-flash', source: 'default' });
    assert.deepEqual(select({}, aggregatorOnly).selection!.text, { provider: 'aggregator', model: 'google/gemini-2.5-flash', source: 'default' });
    assert.deepEqual(select({}, none).selection!.text, { provider: 'offline', model: 'offline', source: 'default' });
    assert.deepEqual(select({}, all, { ...defaults, defaultTextModel: 'qwen/qwen3-235b', defaultImageModel: 'stability/sd3.5-medium' }).selection!.text, {
      provider: 'aggregator',
      model: 'qwen/qwen3-235b',
      source: 'default',
    });
    assert.deepEqual(chain(select({}, all, { ...defaults, defaultImageModel: 'stability/sd3.5-medium' })), ['stability/sd3.5-medium']);
    assert.equal(select({}).selection!.max_tokens, 2048);
  });

  it('preset over server defaults: model, max_tokens and the image chain native → vendor → aggregator', () => {
    for (const [preset, models] of Object.entries(PRESET_MODELS)) {
      const { selection } = select({ preset }, all, { ...defaults, defaultTextModel: 'qwen/qwen3-235b' });
      assert.deepEqual(selection!.text, { provider: 'native', model: models.native, source: 'preset' });
      assert.equal(selection!.max_tokens, models.max_tokens);
      assert.deepEqual(chain({ selection, errors: [] }), [models.native_image, models.vendor_image, models.aggregator_image]);
    }
    assert.deepEqual(
      [1024, 2048, 8192],
      ['hyper', 'balanced', 'hd'].map((preset) => select({ preset }).selection!.max_tokens),
    );
    assert.deepEqual(select({ preset: 'hd' }, aggregatorOnly).selection!.text, { provider: 'aggregator', model: 'google/gemini-2.5-pro', source: 'preset' });
    assert.deepEqual(chain(select({ preset: 'hd' }, aggregatorOnly)), ['google/gemini-2.5-flash-image']);
    const offline = select({ preset: 'hd' }, none).selection!;
    assert.equal(offline.text.provider, 'offline');
    assert.ok(
      offline.warnings.some((warning) => /no model provider is configured/.test(warning)),
      'the offline fallback of a preset is never silent',
    );
  });

  it('model_policy permissive over preset: open-weight text via the aggregator, SD3.5 turbo only, no grounding', () => {
    const { selection } = select({ model_policy: 'permissive', preset: 'hd' });
    assert.deepEqual(selection!.text, { provider: 'aggregator', model: 'meta-llama/llama-3.3-70b-instruct', source: 'policy' });
    assert.deepEqual(chain({ selection, errors: [] }), ['stability/sd3.5-large-turbo']);
    assert.equal(selection!.grounding, false);
    assert.equal(selection!.max_tokens, 8192, 'the preset still sets max_tokens');
  });

  it('explicit models over everything, combined with the other controls', () => {
    const { selection } = select({
      model_policy: 'permissive',
      preset: 'hyper',
      text_model: 'mistralai/mistral-large',
      image_model: 'stability/sd3.5-medium',
      llm_params: { max_tokens: 77 },
    });
    assert.deepEqual(selection!.text, { provider: 'aggregator', model: 'mistralai/mistral-large', source: 'explicit' });
    assert.deepEqual(chain({ selection, errors: [] }), ['stability/sd3.5-medium']);
    assert.equal(selection!.grounding, false);
    assert.equal(selection!.max_tokens, 77);
    assert.deepEqual(select({ text_model: 'gemini-3-pro-preview', preset: 'hyper' }).selection!.text, {
      provider: 'native',
      model: 'gemini-3-pro-preview',
      source: 'explicit',
    });
    assert.deepEqual(chain(select({ image_model: 'pollinations' })), ['pollinations']);
    assert.deepEqual(chain(select({ image_model: 'gemini-2.5-flash-image', model_policy: 'permissive' })), ['gemini-2.5-flash-image']);
    assert.deepEqual(chain(select({ image_model: 'stability/sd3.5-large' })), ['stability/sd3.5-large']);
    assert.deepEqual(
      select({ image_model: 'sd3.5-large' }).errors.map((e) => e.path),
      ['body.image_model'],
      'vendor models are written stability/…',
    );
  });

  it('refuses unknown model IDs and unconfigured providers with 422 paths', () => {
    assert.deepEqual(
      select({ text_model: 'gpt4' }).errors.map((e) => e.path),
      ['body.text_model'],
    );
    assert.deepEqual(
      select({ image_model: 'stability/sdxl' }).errors.map((e) => e.path),
      ['body.image_model'],
    );
    assert.deepEqual(
      select({ text_model: 'gemini-2.5-pro' }, aggregatorOnly).errors.map((e) => e.path),
      ['body.text_model'],
    );
    assert.deepEqual(
      select({ model_policy: 'permissive' }, aggregatorOnly).errors.map((e) => e.path),
      ['body.model_policy'],
      'permissive images need the image vendor',
    );
    assert.equal(select({ model_policy: 'permissive', generate_image: false }, aggregatorOnly).errors.length, 0);
  });
});

describe('generation: operator presets (AgentPool spec.models → MODEL_PRESETS, MODEL_POLICY)', () => {
  const presets = [
    { name: 'balanced', provider: 'openrouter', model: 'qwen/qwen3-235b-a22b', temperature: 0.5, maxTokens: 3000 },
    { name: 'hd', provider: 'gemini', model: 'gemini-2.5-pro', maxTokens: 16000 },
    { name: 'house-style', provider: 'openrouter', model: 'x/y' },
  ];
  const policy = { default: 'hd', fallback: ['balanced'], allowed: ['hd', 'balanced'] };

  it('parses the JSON the operator writes, and names a malformed value', () => {
    const config = loadConfig(GenerationConfigSchema, { MODEL_PRESETS: JSON.stringify(presets), MODEL_POLICY: JSON.stringify(policy) });
    assert.equal(config.MODEL_PRESETS![0]!.maxTokens, 3000);
    assert.throws(() => loadConfig(GenerationConfigSchema, { MODEL_PRESETS: '[{"name":1}]' }), /MODEL_PRESETS/);
    assert.throws(() => loadConfig(GenerationConfigSchema, { MODEL_POLICY: 'not json' }), /MODEL_POLICY: must be JSON/);
  });

  it('replaces preset models, sets the default preset, falls back, restricts the presets a request may name', () => {
    const { defaults: operator, ignored } = operatorDefaults(presets, policy);
    assert.deepEqual(ignored, ['house-style']);
    const options = { ...defaults, ...operator };
    const byDefault = select({}, all, options).selection!;
    assert.equal(byDefault.preset, 'hd');
    assert.deepEqual(byDefault.text, { provider: 'native', model: 'gemini-2.5-pro', source: 'default' });
    assert.equal(byDefault.max_tokens, 16000);
    const balanced = select({ preset: 'balanced' }, all, options).selection!;
    assert.deepEqual(balanced.text, { provider: 'aggregator', model: 'qwen/qwen3-235b-a22b', source: 'preset' });
    assert.equal(balanced.temperature, 0.5);
    assert.equal(balanced.max_tokens, 3000);
    const fallback = select({ preset: 'hd' }, aggregatorOnly, options).selection!;
    assert.equal(fallback.text.model, 'qwen/qwen3-235b-a22b', 'hd needs the native provider: the fallback preset is used');
    assert.ok(fallback.warnings.some((warning) => /fallback preset balanced/.test(warning)));
    assert.deepEqual(
      select({ preset: 'hyper' }, all, options).errors.map((e) => e.path),
      ['body.preset'],
    );
  });
});

describe('generation: precedence end to end (all 14 agents respect it)', function () {
  this.timeout(30_000);
  const { fake, gen } = fakeVendorSuite();

  it('permissive: no native call at all, grounding skipped, every text agent on the open-weight model, SD3.5 turbo image', async () => {
    const reply = await gen.post('/api/v1/timepoints/generate/sync', { query: QUERY, model_policy: 'permissive', generate_image: true });
    assert.equal(reply.status, 200, JSON.stringify(reply.body));
    assert.equal(fake.of('native').length, 0);
    assert.equal(fake.of('aggregator', 'Grounding').length, 0);
    assert.ok(fake.of('aggregator').every((call) => call.body.model === 'meta-llama/llama-3.3-70b-instruct'));
    assert.equal(new Set(fake.of('aggregator').map((call) => call.agent)).size, 12);
    assert.equal(fake.of('image_vendor')[0]!.form!.model, 'sd3.5-large-turbo');
    assert.equal(reply.body.model_policy, 'permissive');
    assert.equal(reply.body.models.agents.Grounding, undefined);
  });

  it('explicit text_model and image_model with a preset: every agent uses them', async () => {
    const reply = await gen.post('/api/v1/timepoints/generate/sync', {
      query: QUERY,
      preset: 'hd',
      text_model: 'qwen/qwen3-235b-a22b',
      image_model: 'stability/sd3.5-medium',
      generate_image: true,
    });
    assert.equal(reply.status, 200);
    assert.equal(fake.of('native').length, 0);
    assert.ok(fake.of('aggregator').every((call) => call.body.model === 'qwen/qwen3-235b-a22b' && call.body.max_tokens === 8192));
    assert.equal(fake.of('image_vendor')[0]!.form!.model, 'sd3.5-medium');
    assert.equal(reply.body.preset, 'hd');
  });

  it('image URLs appear only when generate_image is true', async () => {
    const reply = await gen.post('/api/v1/timepoints/generate/sync', { query: QUERY });
    assert.equal('image_url' in reply.body, false);
    assert.equal(
      fake.requests.some((call) => call.agent === 'ImageGen' || call.agent === 'Optimizer'),
      false,
    );
  });
});
