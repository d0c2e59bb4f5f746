import assert from 'node:assert/strict';
import { type Span, type Tracer, type TracerProvider, trace } from '@opentelemetry/api';
import { type GenerationHarness, QUERY, startGeneration } from './harness.ts';

/** A minimal tracer provider that records span names and attributes. */
function recordingProvider(spans: Array<{ name: string; attributes: Record<string, unknown> }>): TracerProvider {
  const makeSpan = (entry: { name: string; attributes: Record<string, unknown> }): Span =>
    ({
      spanContext: () => ({ traceId: `${'0'.repeat(31)}1`, spanId: `${'0'.repeat(15)}1`, traceFlags: 1 }),
      setAttribute(key: string, value: unknown) {
        entry.attributes[key] = value;
        return this;
      },
      setAttributes(values: Record<string, unknown>) {
        Object.assign(entry.attributes, values);
        return this;
      },
      addEvent() {
        return this;
      },
      addLink() {
        return this;
      },
      addLinks() {
        return this;
      },
      setStatus() {
        return this;
      },
      updateName() {
        return this;
      },
      end() {},
      isRecording: () => true,
      recordException() {},
    }) as unknown as Span;
  const startSpan = (name: string, options?: { attributes?: Record<string, unknown> }) => {
    const entry = { name, attributes: { ...options?.attributes } };
    spans.push(entry);
    return makeSpan(entry);
  };
  const tracer = {
    startSpan,
    startActiveSpan(name: string, ...rest: unknown[]) {
      const fn = rest.at(-1) as (span: Span) => unknown;
      const options = (rest.length > 1 ? rest[0] : undefined) as { attributes?: Record<string, unknown> } | undefined;
      return fn(startSpan(name, options));
    },
  } as unknown as Tracer;
  return { getTracer: () => tracer };
}

describe('generation: a trace span per agent call', function () {
  let gen: GenerationHarness;
  const spans: Array<{ name: string; attributes: Record<string, unknown> }> = [];
  let registered = false;
  before(async () => {
    registered = trace.setGlobalTracerProvider(recordingProvider(spans));
    gen = await startGeneration();
  });
  after(async () => {
    if (registered) trace.disable();
    await gen.stop();
  });

  it('names the agent, provider, model and token usage', async function () {
    if (!registered) this.skip();
    const reply = await gen.post('/api/v1/timepoints/generate/sync', { query: QUERY });
    assert.equal(reply.status, 200);
    const agents = spans.filter((span) => span.name.startsWith('invoke_agent '));
    assert.deepEqual(
      new Set(agents.map((span) => span.name)),
      new Set(
        ['Judge', 'Timeline', 'Grounding', 'Scene', 'Characters', 'CharacterBio', 'Graph', 'Moment', 'Camera', 'Dialog', 'Critique', 'ImagePrompt'].map(
          (name) => `invoke_agent ${name}`,
        ),
      ),
    );
    const dialog = agents.find((span) => span.name === 'invoke_agent Dialog')!;
    assert.equal(dialog.attributes['gen_ai.agent.name'], 'Dialog');
    assert.equal(dialog.attributes['gen_ai.system'], 'offline');
    assert.equal(dialog.attributes['gen_ai.response.model'], 'offline');
    assert.ok(Number(dialog.attributes['gen_ai.usage.output_tokens']) > 0);
  });
});
