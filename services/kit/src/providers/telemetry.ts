/**
 * A span per model call, after OpenTelemetry's GenAI semantic conventions: `{gen_ai.operation.name}
 * {gen_ai.request.model}`, kind CLIENT, with the provider, the model asked for and the one that answered,
 * the sampling parameters that were set, the token usage and, for a failure, `error.type`. Prompts,
 * system instructions and replies are never recorded: they may hold what users wrote.
 */
import { type Attributes, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import { ProviderError, type ProviderKind, type SamplingParams, type Usage } from './types.ts';

/** `gen_ai.operation.name` values of the conventions that the providers' protocols perform. */
export type GenAiOperation = 'chat' | 'generate_content' | 'text_completion';

type ModelMethod = 'generateText' | 'chat' | 'generateImage';

/** `gen_ai.provider.name`: the conventions' well-known name where there is one, else the vendor's own. */
export const GEN_AI_PROVIDER_NAMES: Record<ProviderKind, string> = {
  native: 'gcp.gemini',
  aggregator: 'openrouter',
  image_vendor: 'stability',
  free_image: 'pollinations',
  offline: 'offline',
};

/** What every provider request and result have in common, as far as the span reads them. */
interface ModelRequest {
  model: string;
  params?: SamplingParams;
  json?: boolean;
}
interface ModelResult {
  model: string;
  usage: Usage;
  finish_reason?: string;
}

const tracer = trace.getTracer('tempora-kit-providers');

function requestAttributes(kind: ProviderKind, operation: GenAiOperation, method: ModelMethod, request: ModelRequest): Attributes {
  const params = request.params ?? {};
  const provider = GEN_AI_PROVIDER_NAMES[kind];
  const attributes: Attributes = {
    'gen_ai.operation.name': operation,
    'gen_ai.provider.name': provider,
    // The attribute gen_ai.provider.name replaced (semantic conventions 1.37); backends' GenAI views still read it.
    'gen_ai.system': provider,
    'gen_ai.request.model': request.model,
    'gen_ai.output.type': method === 'generateImage' ? 'image' : request.json ? 'json' : 'text',
    'tempora.provider.kind': kind,
  };
  for (const name of ['temperature', 'max_tokens', 'top_p', 'top_k', 'frequency_penalty', 'presence_penalty'] as const) {
    if (params[name] !== undefined) attributes[`gen_ai.request.${name}`] = params[name];
  }
  if (params.stop?.length) attributes['gen_ai.request.stop_sequences'] = params.stop;
  return attributes;
}

/**
 * Makes each of `operations`' methods of a provider class run in its model-call span (the HTTP client
 * span of the vendor call, retries included, sits under it). Applied to the class's prototype once,
 * beside the class, so that every instance, wherever a service builds it, is traced the same way.
 */
export function traceModelCalls(provider: { prototype: object }, operations: Partial<Record<ModelMethod, GenAiOperation>>): void {
  const prototype = provider.prototype as Record<ModelMethod, (this: { kind: ProviderKind }, request: ModelRequest) => Promise<ModelResult>>;
  for (const [method, operation] of Object.entries(operations) as Array<[ModelMethod, GenAiOperation]>) {
    const call = prototype[method];
    prototype[method] = function (this: { kind: ProviderKind }, request: ModelRequest): Promise<ModelResult> {
      const attributes = requestAttributes(this.kind, operation, method, request);
      return tracer.startActiveSpan(`${operation} ${request.model}`, { kind: SpanKind.CLIENT, attributes }, async (span) => {
        try {
          const result = await call.call(this, request);
          span.setAttributes({
            'gen_ai.response.model': result.model,
            'gen_ai.usage.input_tokens': result.usage.input_tokens,
            'gen_ai.usage.output_tokens': result.usage.output_tokens,
            ...(result.finish_reason ? { 'gen_ai.response.finish_reasons': [result.finish_reason] } : {}),
          });
          return result;
        } catch (error) {
          span.setAttribute('error.type', error instanceof ProviderError ? error.code : error instanceof Error ? error.name : 'unknown');
          span.setStatus({ code: SpanStatusCode.ERROR, message: error instanceof Error ? error.message : String(error) });
          throw error;
        } finally {
          span.end();
        }
      });
    };
  }
}
