import assert from 'node:assert/strict';
import { fakeVendorSuite, QUERY } from './harness.ts';

/** Every bound of platform-interface.md's llm_params table: [field, rejected values, accepted values]. */
const BOUNDS: Array<[string, unknown[], unknown[]]> = [
  ['temperature', [-0.01, 2.01, '1'], [0, 2, 0.7]],
  ['max_tokens', [0, 32769, 1.5], [1, 32768]],
  ['top_p', [-0.01, 1.01], [0, 1]],
  ['top_k', [0, -1, 2.5], [1, 1000]],
  ['frequency_penalty', [-2.01, 2.01], [-2, 2]],
  ['presence_penalty', [-2.01, 2.01], [-2, 2]],
  ['repetition_penalty', [-0.01, 2.01], [0, 2]],
  ['stop', [['a', 'b', 'c', 'd', 'e'], 'STOP', [5]], [[], ['a', 'b', 'c', 'd']]],
  ['thinking_level', ['extreme', 'None', ''], ['none', 'low', 'medium', 'high']],
  ['system_prompt_prefix', ['x'.repeat(2001), 5], ['', 'x'.repeat(2000)]],
  ['system_prompt_suffix', ['x'.repeat(2001), null], ['', 'x'.repeat(2000)]],
];

describe('generation: llm_params', function () {
  this.timeout(60_000);
  const { fake, gen } = fakeVendorSuite();

  it('refuses every out-of-range value with 422 naming the field (checked before any model call)', async () => {
    for (const [field, rejected] of BOUNDS) {
      for (const value of rejected) {
        const reply = await gen.post('/api/v1/timepoints/generate/sync', { query: QUERY, llm_params: { [field]: value } });
        assert.equal(reply.status, 422, `${field}=${JSON.stringify(value).slice(0, 20)}`);
        assert.equal(reply.body.errors.length, 1);
        assert.ok(
          reply.body.errors[0].path === `body.llm_params.${field}` || reply.body.errors[0].path.startsWith(`body.llm_params.${field}.`),
          `${field}=${JSON.stringify(value).slice(0, 20)}: ${reply.body.errors[0].path}`,
        );
      }
    }
    const unknown = await gen.post('/api/v1/timepoints/generate/sync', { query: QUERY, llm_params: { temprature: 1 } });
    assert.equal(unknown.status, 422);
    assert.match(JSON.stringify(unknown.body.errors), /temprature/);
    for (const query of ['ab', 'x'.repeat(501)]) assert.equal((await gen.post('/api/v1/timepoints/generate/sync', { query })).status, 422);
    assert.equal(fake.requests.length, 0);
  });

  it('accepts every boundary value (validated together, offline text model)', async () => {
    for (const [field, , accepted] of BOUNDS) {
      for (const value of accepted) {
        const reply = await gen.post('/api/v1/timepoints/generate/stream', { query: QUERY, text_model: 'offline', llm_params: { [field]: value } });
        assert.equal(reply.status, 200, `${field}=${JSON.stringify(value).slice(0, 20)}: ${JSON.stringify(reply.body).slice(0, 300)}`);
      }
    }
  });

  it('applies to every agent over its built-in defaults, and prefix/suffix wrap every system prompt (native)', async () => {
    const reply = await gen.post('/api/v1/timepoints/generate/sync', {
      query: QUERY,
      generate_image: true,
      llm_params: {
        temperature: 0.33,
        max_tokens: 500,
        top_p: 0.8,
        top_k: 20,
        stop: ['###'],
        thinking_level: 'low',
        frequency_penalty: 0.5,
        system_prompt_prefix: 'PREFIX-RULES',
        system_prompt_suffix: 'SUFFIX-RULES',
      },
    });
    assert.equal(reply.status, 200);
    const calls = fake.of('native').filter((call) => call.agent !== 'ImageGen');
    assert.equal(new Set(calls.map((call) => call.agent)).size, 13);
    for (const call of calls) {
      const system: string = call.body.systemInstruction.parts[0].text;
      assert.ok(system.startsWith('PREFIX-RULES\n\n') && system.endsWith('\n\nSUFFIX-RULES'), call.agent);
      assert.deepEqual(call.body.generationConfig.temperature, 0.33, call.agent);
      assert.equal(call.body.generationConfig.maxOutputTokens, 500);
      assert.equal(call.body.generationConfig.topK, 20);
      assert.deepEqual(call.body.generationConfig.stopSequences, ['###']);
      assert.deepEqual(call.body.generationConfig.thinkingConfig, { thinkingLevel: 'low' });
      assert.ok(!JSON.stringify(call.body).includes('frequency'), 'aggregator-only parameter kept from the native provider');
    }
    assert.ok(reply.body.warnings.includes('llm_params.frequency_penalty is not supported by the native provider and was not sent'));
  });

  it('built-in temperatures: 0.2 factual, 0.85 creative, scene 0.7, dialog 0.85; preset max_tokens', async () => {
    const reply = await gen.post('/api/v1/timepoints/generate/sync', {
      query: QUERY,
      preset: 'hyper',
      text_model: 'meta-llama/llama-3.3-70b-instruct',
      llm_params: { presence_penalty: 1.5, repetition_penalty: 1.2, thinking_level: 'high' },
    });
    assert.equal(reply.status, 200);
    const temperature = (agent: string) => fake.of('aggregator', agent)[0]!.body.temperature;
    for (const agent of ['Judge', 'Timeline', 'Grounding', 'Characters', 'Graph', 'Critique']) assert.equal(temperature(agent), 0.2, agent);
    for (const agent of ['CharacterBio', 'Moment', 'Camera', 'ImagePrompt']) assert.equal(temperature(agent), 0.85, agent);
    assert.equal(temperature('Scene'), 0.7);
    assert.equal(temperature('Dialog'), 0.85);
    for (const call of fake.of('aggregator')) {
      assert.equal(call.body.max_tokens, 1024);
      assert.equal(call.body.presence_penalty, 1.5);
      assert.equal(call.body.repetition_penalty, 1.2);
      assert.equal(call.body.thinking_level, undefined, 'native-only parameter kept from the aggregator');
    }
  });
});
