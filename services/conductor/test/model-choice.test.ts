import assert from 'node:assert/strict';
import { GeminiProvider, OfflineProvider, OpenRouterProvider } from '@tempora/kit/providers';
import { ConfigError } from '@tempora/kit/runtime';
import { chooseModel, type ModelSettings } from '../src/domain/models.ts';

const http = { timeoutMs: 1000, retries: 0 };
const native = new GeminiProvider({ ...http, apiKey: 'k' });
const aggregator = new OpenRouterProvider({ ...http, baseUrl: 'http://127.0.0.1:9/v1' });
const offline = new OfflineProvider();
const base: ModelSettings = {
  CONDUCTOR_PERMISSIVE_MODEL: 'meta-llama/llama-3.3-70b-instruct',
  CONDUCTOR_NATIVE_MODEL: 'gemini-2.5-flash',
  CONDUCTOR_AGGREGATOR_MODEL: 'google/gemini-2.5-flash',
};
const pick = (settings: Partial<ModelSettings>, providers: Parameters<typeof chooseModel>[1]) => {
  const choice = chooseModel({ ...base, ...settings }, providers);
  return [choice.kind, choice.model, choice.source];
};

describe('conductor model selection (the spec precedence: explicit, policy, default)', () => {
  it('takes an explicit model first, on its own provider', () => {
    assert.deepEqual(pick({ CONDUCTOR_MODEL: 'openai/gpt-4o-mini', CONDUCTOR_MODEL_POLICY: 'permissive' }, { native, aggregator, offline }), [
      'aggregator',
      'openai/gpt-4o-mini',
      'explicit',
    ]);
    assert.deepEqual(pick({ CONDUCTOR_MODEL: 'gemini-2.5-pro' }, { native, aggregator, offline }), ['native', 'gemini-2.5-pro', 'explicit']);
    assert.deepEqual(pick({ CONDUCTOR_MODEL: 'offline' }, { native, offline }), ['offline', 'offline', 'explicit']);
  });

  it('then the permissive policy: an open-weight model through the aggregator, never the native provider', () => {
    assert.deepEqual(pick({ CONDUCTOR_MODEL_POLICY: 'permissive' }, { native, aggregator, offline }), [
      'aggregator',
      'meta-llama/llama-3.3-70b-instruct',
      'policy',
    ]);
  });

  it('then the server default: native, else the aggregator, else the offline planner', () => {
    assert.deepEqual(pick({}, { native, aggregator, offline }), ['native', 'gemini-2.5-flash', 'default']);
    assert.deepEqual(pick({}, { aggregator, offline }), ['aggregator', 'google/gemini-2.5-flash', 'default']);
    assert.deepEqual(pick({}, { offline }), ['offline', 'offline', 'default']);
  });

  it('never lets the offline planner stand in for a provider that was asked for', () => {
    assert.throws(() => pick({ CONDUCTOR_MODEL: 'gemini-2.5-pro' }, { aggregator, offline }), ConfigError);
    assert.throws(() => pick({ CONDUCTOR_MODEL: 'openai/gpt-4o' }, { native, offline }), ConfigError);
    assert.throws(() => pick({ CONDUCTOR_MODEL_POLICY: 'permissive' }, { native, offline }), ConfigError);
    assert.throws(() => pick({ CONDUCTOR_MODEL: 'gpt4' }, { native, aggregator, offline }), /neither/);
  });
});
