import { context } from '@opentelemetry/api';
import { suppressTracing } from '@opentelemetry/core';
import { callProvider, type ProviderHttpSettings } from './http.ts';
import { traceModelCalls } from './telemetry.ts';
import { estimateTokens, type ImageProvider, type ImageRequest, type ImageResult, ProviderError } from './types.ts';

/**
 * The free image generator, selected by its keyword (`image_model: "pollinations"`): Pollinations'
 * `GET {base}/prompt/{prompt}?width&height&seed&model&nologo`, which answers with the image bytes. No key.
 */
export const FREE_IMAGE_KEYWORD = 'pollinations';

export interface PollinationsOptions extends ProviderHttpSettings {
  /** Default https://image.pollinations.ai */
  baseUrl?: string;
  /** Pollinations' own model name; default flux. */
  model?: string;
}

const SIZES: Record<string, [number, number]> = { '16:9': [1344, 768], '1:1': [1024, 1024], '4:3': [1152, 864], '3:2': [1216, 832] };

export class PollinationsProvider implements ImageProvider {
  readonly kind = 'free_image' as const;
  private readonly options: PollinationsOptions;

  constructor(options: PollinationsOptions) {
    this.options = options;
  }

  async generateImage(request: ImageRequest): Promise<ImageResult> {
    const [width, height] = SIZES[request.aspect_ratio ?? '16:9'] ?? [1344, 768];
    const query = new URLSearchParams({ width: String(width), height: String(height), nologo: 'true', model: this.options.model ?? 'flux' });
    if (request.seed !== undefined) query.set('seed', String(request.seed));
    if (request.negative_prompt) query.set('negative_prompt', request.negative_prompt);
    const base = (this.options.baseUrl ?? 'https://image.pollinations.ai').replace(/\/$/, '');
    // The prompt travels in the URL, which an HTTP client span records (url.full): the call makes none;
    // its model-call span (telemetry.ts) records it without the prompt.
    const reply = await context.with(suppressTracing(context.active()), () =>
      callProvider({
        provider: 'free_image',
        method: 'GET',
        url: `${base}/prompt/${encodeURIComponent(request.prompt.slice(0, 1500))}?${query}`,
        timeoutMs: this.options.timeoutMs,
        retries: this.options.retries,
        backoffMs: this.options.backoffMs,
        maxBackoffMs: this.options.maxBackoffMs,
        signal: request.signal,
        expect: 'bytes',
      }),
    );
    const type = reply.headers.get('content-type') ?? '';
    if (!type.startsWith('image/') || reply.body.length === 0)
      throw new ProviderError('free_image', 'malformed', `the free image generator sent ${type || 'no content type'} instead of an image`);
    const input = estimateTokens(request.prompt);
    return {
      provider: 'free_image',
      model: FREE_IMAGE_KEYWORD,
      data: reply.body,
      mime_type: type.split(';')[0] as string,
      usage: { input_tokens: input, output_tokens: 0, thinking_tokens: 0, total_tokens: input },
    };
  }
}

traceModelCalls(PollinationsProvider, { generateImage: 'generate_content' });
