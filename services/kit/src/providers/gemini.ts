import { callProvider, type ProviderHttpSettings } from './http.ts';
import {
  AGGREGATOR_ONLY_PARAMS,
  ProviderError,
  estimateTokens,
  type Citation,
  type SamplingParams,
  type ImageProvider,
  type ImageRequest,
  type ImageResult,
  type TextProvider,
  type TextRequest,
  type TextResult,
} from './types.ts';

/**
 * The native provider: Google's Gemini `models/{model}:generateContent` REST protocol (API key in
 * `x-goog-api-key`). Text, JSON mode, thinking level, search grounding and image models.
 */
export interface GeminiOptions extends ProviderHttpSettings {
  apiKey: string;
  /** Default https://generativelanguage.googleapis.com */
  baseUrl?: string;
  apiVersion?: string;
}

interface GeminiPart {
  text?: string;
  thought?: boolean;
  inlineData?: { mimeType?: string; data?: string };
}
interface GeminiResponse {
  candidates?: Array<{
    content?: { parts?: GeminiPart[] };
    finishReason?: string;
    groundingMetadata?: { groundingChunks?: Array<{ web?: { uri?: string; title?: string } }> };
  }>;
  usageMetadata?: { promptTokenCount?: number; candidatesTokenCount?: number; thoughtsTokenCount?: number; totalTokenCount?: number };
  promptFeedback?: { blockReason?: string };
}

/** thinking_level onto Gemini's thinkingConfig: `none` turns thinking off (budget 0), the others name a level. */
export function thinkingConfig(level: SamplingParams['thinking_level']) {
  if (!level) return undefined;
  if (level === 'none') return { thinkingBudget: 0 };
  return { thinkingLevel: level };
}

export class GeminiProvider implements TextProvider, ImageProvider {
  readonly kind = 'native' as const;
  private readonly options: GeminiOptions;

  constructor(options: GeminiOptions) {
    this.options = options;
  }

  private url(model: string): string {
    const base = (this.options.baseUrl ?? 'https://generativelanguage.googleapis.com').replace(/\/$/, '');
    return `${base}/${this.options.apiVersion ?? 'v1beta'}/models/${encodeURIComponent(model)}:generateContent`;
  }

  private async call(model: string, body: unknown, signal: AbortSignal | undefined): Promise<GeminiResponse> {
    const reply = await callProvider<GeminiResponse>({
      provider: 'native',
      url: this.url(model),
      headers: { 'x-goog-api-key': this.options.apiKey },
      json: body,
      timeoutMs: this.options.timeoutMs,
      retries: this.options.retries,
      backoffMs: this.options.backoffMs,
      maxBackoffMs: this.options.maxBackoffMs,
      signal,
    });
    if (!reply.body || typeof reply.body !== 'object') throw new ProviderError('native', 'malformed', 'the native provider sent an unexpected reply');
    if (reply.body.promptFeedback?.blockReason) {
      throw new ProviderError('native', 'refused', `the native provider blocked the prompt: ${reply.body.promptFeedback.blockReason}`);
    }
    return reply.body;
  }

  async generateText(request: TextRequest): Promise<TextResult> {
    const params = request.params ?? {};
    const generationConfig: Record<string, unknown> = {};
    if (params.temperature !== undefined) generationConfig.temperature = params.temperature;
    if (params.max_tokens !== undefined) generationConfig.maxOutputTokens = params.max_tokens;
    if (params.top_p !== undefined) generationConfig.topP = params.top_p;
    if (params.top_k !== undefined) generationConfig.topK = params.top_k;
    if (params.stop?.length) generationConfig.stopSequences = params.stop;
    // Search grounding and JSON mode cannot be combined on generateContent: grounded calls ask for JSON in the prompt.
    if (request.json && !request.grounding) generationConfig.responseMimeType = 'application/json';
    const thinking = thinkingConfig(params.thinking_level);
    if (thinking) generationConfig.thinkingConfig = thinking;
    const body: Record<string, unknown> = {
      contents: [{ role: 'user', parts: [{ text: request.prompt }] }],
      generationConfig,
    };
    if (request.system) body.systemInstruction = { parts: [{ text: request.system }] };
    if (request.grounding) body.tools = [{ google_search: {} }];

    const reply = await this.call(request.model, body, request.signal);
    const candidate = reply.candidates?.[0];
    const parts = candidate?.content?.parts;
    if (!Array.isArray(parts)) throw new ProviderError('native', 'malformed', `the native provider returned no content (finish reason ${candidate?.finishReason ?? 'unknown'})`);
    const text = parts.filter((part) => !part.thought && typeof part.text === 'string').map((part) => part.text).join('');
    const usage = reply.usageMetadata ?? {};
    const input = usage.promptTokenCount ?? estimateTokens(request.system + request.prompt);
    const thoughts = usage.thoughtsTokenCount ?? 0;
    const output = (usage.candidatesTokenCount ?? estimateTokens(text)) + thoughts;
    const citations: Citation[] = [];
    for (const chunk of candidate?.groundingMetadata?.groundingChunks ?? []) {
      if (chunk.web?.uri) citations.push({ title: chunk.web.title ?? chunk.web.uri, url: chunk.web.uri });
    }
    return {
      text,
      provider: 'native',
      model: request.model,
      usage: { input_tokens: input, output_tokens: output, thinking_tokens: thoughts, total_tokens: usage.totalTokenCount ?? input + output },
      citations,
      dropped_params: AGGREGATOR_ONLY_PARAMS.filter((name) => params[name] !== undefined),
    };
  }

  async generateImage(request: ImageRequest): Promise<ImageResult> {
    const body = {
      contents: [{ role: 'user', parts: [{ text: request.negative_prompt ? `${request.prompt}\nAvoid: ${request.negative_prompt}` : request.prompt }] }],
      generationConfig: {
        responseModalities: ['IMAGE'],
        ...(request.aspect_ratio ? { imageConfig: { aspectRatio: request.aspect_ratio } } : {}),
      },
    };
    const reply = await this.call(request.model, body, request.signal);
    const image = reply.candidates?.[0]?.content?.parts?.find((part) => part.inlineData?.data);
    if (!image?.inlineData?.data) throw new ProviderError('native', 'malformed', 'the native image model returned no image');
    const usage = reply.usageMetadata ?? {};
    const input = usage.promptTokenCount ?? estimateTokens(request.prompt);
    const output = usage.candidatesTokenCount ?? 0;
    return {
      provider: 'native',
      model: request.model,
      data: Buffer.from(image.inlineData.data, 'base64'),
      mime_type: image.inlineData.mimeType ?? 'image/png',
      usage: { input_tokens: input, output_tokens: output, thinking_tokens: 0, total_tokens: usage.totalTokenCount ?? input + output },
    };
  }
}
