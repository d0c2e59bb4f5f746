import { z } from 'zod';
import { callProvider, type ProviderHttpSettings } from './http.ts';
import { traceModelCalls } from './telemetry.ts';
import {
  AGGREGATOR_ONLY_PARAMS,
  type ChatMessage,
  type ChatRequest,
  type ChatResult,
  type Citation,
  estimateTokens,
  type ImageProvider,
  type ImageRequest,
  type ImageResult,
  ProviderError,
  type SamplingParams,
  type TextRequest,
  type TextResult,
  type ToolCall,
  type ToolCallingProvider,
  toolResultObject,
  type Usage,
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

const nullishString = z.string().nullish();
const nullishCount = z.number().nullish();

/** A part of a reply's content: the fields the adapter reads. Parts sent back in later turns have this shape too. */
const GeminiPart = z.looseObject({
  text: nullishString,
  thought: z.boolean().nullish(),
  inlineData: z.looseObject({ mimeType: nullishString, data: nullishString }).nullish(),
  functionCall: z.looseObject({ name: nullishString, args: z.unknown(), id: nullishString }).nullish(),
  thoughtSignature: nullishString,
});
type GeminiPart = z.infer<typeof GeminiPart>;
/** A part the platform sends: one of the model's, or the answer to one of its function calls. */
type SentPart = GeminiPart & { functionResponse?: { name: string; response: Record<string, unknown>; id?: string } };
interface GeminiContent {
  role: 'user' | 'model';
  parts: SentPart[];
}

/** The fields of a generateContent reply the adapter reads. */
const GeminiReply = z.looseObject({
  candidates: z
    .array(
      z.looseObject({
        content: z.looseObject({ parts: z.array(GeminiPart).nullish() }).nullish(),
        finishReason: nullishString,
        groundingMetadata: z
          .looseObject({ groundingChunks: z.array(z.looseObject({ web: z.looseObject({ uri: nullishString, title: nullishString }).nullish() })).nullish() })
          .nullish(),
      }),
    )
    .nullish(),
  usageMetadata: z
    .looseObject({ promptTokenCount: nullishCount, candidatesTokenCount: nullishCount, thoughtsTokenCount: nullishCount, totalTokenCount: nullishCount })
    .nullish(),
  promptFeedback: z.looseObject({ blockReason: nullishString }).nullish(),
});
type GeminiReply = z.infer<typeof GeminiReply>;

/** thinking_level onto Gemini's thinkingConfig: `none` turns thinking off (budget 0), the others name a level. */
export function thinkingConfig(level: SamplingParams['thinking_level']) {
  if (!level) return undefined;
  if (level === 'none') return { thinkingBudget: 0 };
  return { thinkingLevel: level };
}

export class GeminiProvider implements ToolCallingProvider, ImageProvider {
  readonly kind = 'native' as const;
  private readonly options: GeminiOptions;

  constructor(options: GeminiOptions) {
    this.options = options;
  }

  private url(model: string): string {
    const base = (this.options.baseUrl ?? 'https://generativelanguage.googleapis.com').replace(/\/$/, '');
    return `${base}/${this.options.apiVersion ?? 'v1beta'}/models/${encodeURIComponent(model)}:generateContent`;
  }

  private async call(model: string, body: unknown, signal: AbortSignal | undefined): Promise<GeminiReply> {
    const reply = await callProvider({
      provider: 'native',
      schema: GeminiReply,
      url: this.url(model),
      headers: { 'x-goog-api-key': this.options.apiKey },
      json: body,
      timeoutMs: this.options.timeoutMs,
      retries: this.options.retries,
      backoffMs: this.options.backoffMs,
      maxBackoffMs: this.options.maxBackoffMs,
      signal,
    });
    if (reply.body.promptFeedback?.blockReason) {
      throw new ProviderError('native', 'refused', `the native provider blocked the prompt: ${reply.body.promptFeedback.blockReason}`);
    }
    return reply.body;
  }

  async generateText(request: TextRequest): Promise<TextResult> {
    const params = request.params ?? {};
    const generationConfig = samplingConfig(params);
    // Search grounding and JSON mode cannot be combined on generateContent: grounded calls ask for JSON in the prompt.
    if (request.json && !request.grounding) generationConfig.responseMimeType = 'application/json';
    const body: Record<string, unknown> = {
      contents: [{ role: 'user', parts: [{ text: request.prompt }] }],
      generationConfig,
    };
    if (request.system) body.systemInstruction = { parts: [{ text: request.system }] };
    if (request.grounding) body.tools = [{ google_search: {} }];

    const reply = await this.call(request.model, body, request.signal);
    const candidate = reply.candidates?.[0];
    const parts = candidate?.content?.parts;
    if (!Array.isArray(parts))
      throw new ProviderError('native', 'malformed', `the native provider returned no content (finish reason ${candidate?.finishReason ?? 'unknown'})`);
    const text = parts
      .filter((part) => !part.thought && typeof part.text === 'string')
      .map((part) => part.text)
      .join('');
    const citations: Citation[] = [];
    for (const chunk of candidate?.groundingMetadata?.groundingChunks ?? []) {
      if (chunk.web?.uri) citations.push({ title: chunk.web.title ?? chunk.web.uri, url: chunk.web.uri });
    }
    return {
      text,
      provider: 'native',
      model: request.model,
      usage: usageOf(reply, request.system + request.prompt, text),
      citations,
      dropped_params: AGGREGATOR_ONLY_PARAMS.filter((name) => params[name] !== undefined),
    };
  }

  /**
   * A turn with tools offered: `functionDeclarations` with `functionCallingConfig.mode: AUTO`. Calls come
   * back as `functionCall` parts (several may come in one turn); each answer goes back as a
   * `functionResponse` part of a user turn, with the call's id when the model gave one. Thought signatures
   * are handed back on the call parts they came with, as the protocol requires across turns.
   */
  async chat(request: ChatRequest): Promise<ChatResult> {
    const params = request.params ?? {};
    const system = request.messages
      .filter((message) => message.role === 'system')
      .map((message) => message.content)
      .join('\n\n');
    const body: Record<string, unknown> = { contents: wireContents(request.messages), generationConfig: samplingConfig(params) };
    if (system) body.systemInstruction = { parts: [{ text: system }] };
    if (request.tools.length > 0) {
      body.tools = [{ functionDeclarations: request.tools.map((tool) => ({ name: tool.name, description: tool.description, parameters: tool.parameters })) }];
      body.toolConfig = { functionCallingConfig: { mode: 'AUTO' } };
    }
    const reply = await this.call(request.model, body, request.signal);
    const candidate = reply.candidates?.[0];
    const parts = candidate?.content?.parts ?? [];
    if (!candidate?.content && candidate?.finishReason !== 'MAX_TOKENS') {
      throw new ProviderError('native', 'malformed', `the native provider returned no content (finish reason ${candidate?.finishReason ?? 'unknown'})`);
    }
    const text = parts
      .filter((part) => !part.thought && typeof part.text === 'string')
      .map((part) => part.text)
      .join('');
    const calls: ToolCall[] = [];
    for (const part of parts) {
      if (!part.functionCall) continue;
      const { name, args, id } = part.functionCall;
      if (typeof name !== 'string' || !name) throw new ProviderError('native', 'malformed', 'the native provider sent a function call without a name');
      const read =
        args && typeof args === 'object' && !Array.isArray(args)
          ? { arguments: args as Record<string, unknown> }
          : args === undefined
            ? { arguments: {} }
            : { arguments: {}, arguments_error: 'the arguments are not a JSON object' };
      calls.push({
        id: id || `call_${calls.length}`,
        name,
        ...read,
        ...(id ? {} : { synthetic_id: true }),
        ...(part.thoughtSignature ? { signature: part.thoughtSignature } : {}),
      });
    }
    return {
      text,
      tool_calls: calls,
      provider: 'native',
      model: request.model,
      usage: usageOf(reply, JSON.stringify(body.contents), text),
      finish_reason: candidate?.finishReason ?? 'STOP',
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

traceModelCalls(GeminiProvider, { generateText: 'generate_content', chat: 'generate_content', generateImage: 'generate_content' });

/** Sampling parameters in generateContent's `generationConfig`. */
function samplingConfig(params: SamplingParams): Record<string, unknown> {
  const config: Record<string, unknown> = {};
  if (params.temperature !== undefined) config.temperature = params.temperature;
  if (params.max_tokens !== undefined) config.maxOutputTokens = params.max_tokens;
  if (params.top_p !== undefined) config.topP = params.top_p;
  if (params.top_k !== undefined) config.topK = params.top_k;
  if (params.stop?.length) config.stopSequences = params.stop;
  const thinking = thinkingConfig(params.thinking_level);
  if (thinking) config.thinkingConfig = thinking;
  return config;
}

/** The reply's token counts (thoughts are output), estimated from the text where the reply has none. */
function usageOf(reply: GeminiReply, sent: string, text: string): Usage {
  const usage = reply.usageMetadata ?? {};
  const input = usage.promptTokenCount ?? estimateTokens(sent);
  const thoughts = usage.thoughtsTokenCount ?? 0;
  const output = (usage.candidatesTokenCount ?? estimateTokens(text)) + thoughts;
  return { input_tokens: input, output_tokens: output, thinking_tokens: thoughts, total_tokens: usage.totalTokenCount ?? input + output };
}

/**
 * The conversation as generateContent `contents`: assistant turns are the model's (text, then its calls),
 * and the answers to one turn's calls travel together in one user turn, in the order of the calls.
 */
function wireContents(messages: ChatMessage[]): GeminiContent[] {
  const contents: GeminiContent[] = [];
  for (const message of messages) {
    if (message.role === 'system') continue;
    if (message.role === 'user') {
      contents.push({ role: 'user', parts: [{ text: message.content }] });
    } else if (message.role === 'assistant') {
      const parts: SentPart[] = message.content ? [{ text: message.content }] : [];
      for (const call of message.tool_calls ?? []) {
        parts.push({
          functionCall: { name: call.name, args: call.arguments, ...(call.synthetic_id ? {} : { id: call.id }) },
          ...(call.signature ? { thoughtSignature: call.signature } : {}),
        });
      }
      contents.push({ role: 'model', parts });
    } else {
      const call = findCall(messages, message.tool_call_id);
      const part: SentPart = {
        functionResponse: { name: message.name, response: toolResultObject(message.content), ...(call && !call.synthetic_id ? { id: call.id } : {}) },
      };
      const last = contents[contents.length - 1];
      if (last?.role === 'user' && last.parts.every((existing) => existing.functionResponse)) last.parts.push(part);
      else contents.push({ role: 'user', parts: [part] });
    }
  }
  return contents;
}

function findCall(messages: ChatMessage[], id: string): ToolCall | undefined {
  for (const message of messages) {
    if (message.role !== 'assistant') continue;
    const call = message.tool_calls?.find((candidate) => candidate.id === id);
    if (call) return call;
  }
  return undefined;
}
