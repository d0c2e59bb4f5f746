import { z } from 'zod';
import { callProvider, type ProviderHttpSettings } from './http.ts';
import { traceModelCalls } from './telemetry.ts';
import { estimateTokens, type ImageProvider, type ImageRequest, type ImageResult, ProviderError } from './types.ts';

/**
 * The image vendor: Stability AI's Stable Image API, `POST {base}/v2beta/stable-image/generate/sd3`
 * (multipart form; `Accept: application/json` returns the image base64-encoded). Model IDs are written
 * `stability/<model>` in requests; the vendor's own names are `sd3.5-large-turbo`, `sd3.5-large`, `sd3.5-medium`.
 */
export const IMAGE_VENDOR = 'stability';
export const IMAGE_VENDOR_MODELS = ['sd3.5-large-turbo', 'sd3.5-large', 'sd3.5-medium'] as const;

export interface StabilityOptions extends ProviderHttpSettings {
  apiKey: string;
  /** Default https://api.stability.ai */
  baseUrl?: string;
}

/** The fields of the SD3 reply the adapter reads. */
const StabilityReply = z.looseObject({ image: z.string().nullish(), finish_reason: z.string().nullish() });

/** `stability/sd3.5-large` → `sd3.5-large`; undefined when the ID is not one of the vendor's models. */
export function vendorModel(id: string): string | undefined {
  const name = id.startsWith(`${IMAGE_VENDOR}/`) ? id.slice(IMAGE_VENDOR.length + 1) : id;
  return (IMAGE_VENDOR_MODELS as readonly string[]).includes(name) ? name : undefined;
}

export class StabilityProvider implements ImageProvider {
  readonly kind = 'image_vendor' as const;
  private readonly options: StabilityOptions;

  constructor(options: StabilityOptions) {
    this.options = options;
  }

  async generateImage(request: ImageRequest): Promise<ImageResult> {
    const model = vendorModel(request.model);
    if (!model) throw new ProviderError('image_vendor', 'refused', `${request.model} is not an image model of ${IMAGE_VENDOR}`);
    const form = new FormData();
    form.set('prompt', request.prompt);
    form.set('model', model);
    form.set('output_format', 'png');
    if (request.aspect_ratio) form.set('aspect_ratio', request.aspect_ratio);
    if (request.seed !== undefined) form.set('seed', String(request.seed));
    // Turbo ignores negative prompts.
    if (request.negative_prompt && model !== 'sd3.5-large-turbo') form.set('negative_prompt', request.negative_prompt);
    const reply = await callProvider({
      provider: 'image_vendor',
      schema: StabilityReply,
      url: `${(this.options.baseUrl ?? 'https://api.stability.ai').replace(/\/$/, '')}/v2beta/stable-image/generate/sd3`,
      headers: { authorization: `Bearer ${this.options.apiKey}` },
      body: form,
      timeoutMs: this.options.timeoutMs,
      retries: this.options.retries,
      backoffMs: this.options.backoffMs,
      maxBackoffMs: this.options.maxBackoffMs,
      signal: request.signal,
    });
    if (!reply.body.image) throw new ProviderError('image_vendor', 'malformed', 'the image vendor returned no image');
    if (reply.body.finish_reason === 'CONTENT_FILTERED') throw new ProviderError('image_vendor', 'refused', 'the image vendor filtered the image');
    const input = estimateTokens(request.prompt);
    return {
      provider: 'image_vendor',
      model: `${IMAGE_VENDOR}/${model}`,
      data: Buffer.from(reply.body.image, 'base64'),
      mime_type: 'image/png',
      usage: { input_tokens: input, output_tokens: 0, thinking_tokens: 0, total_tokens: input },
    };
  }
}

traceModelCalls(StabilityProvider, { generateImage: 'generate_content' });
