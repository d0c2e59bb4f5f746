import { z } from 'zod';
import { callProvider, type ProviderHttpSettings } from './http.ts';
import { traceModelCalls } from './telemetry.ts';
import {
  type ChatMessage,
  type ChatRequest,
  type ChatResult,
  estimateTokens,
  type ImageProvider,
  type ImageRequest,
  type ImageResult,
  NATIVE_ONLY_PARAMS,
  ProviderError,
  readToolArguments,
  type SamplingParams,
  type TextRequest,
  type TextResult,
  type ToolCall,
  type ToolCallingProvider,
} from './types.ts';

/**
 * The aggregator: OpenRouter's OpenAI-compatible `POST {base}/chat/completions`. Any OpenAI-compatible
 * server (vLLM, llama.cpp, Ollama) works with `baseUrl` pointed at it; the key is then optional.
 */
export interface OpenRouterOptions extends ProviderHttpSettings {
  apiKey?: string;
  /** Default https://openrouter.ai/api/v1 */
  baseUrl?: string;
  /** Sent as HTTP-Referer / X-Title (OpenRouter's app attribution). */
  referer?: string;
  title?: string;
}

const nullishString = z.string().nullish();
const nullishCount = z.number().nullish();

/** The fields of a chat-completions reply the adapter reads. */
const ChatReply = z.looseObject({
  choices: z
    .array(
      z.looseObject({
        message: z
          .looseObject({
            content: z.union([z.string(), z.array(z.looseObject({ text: nullishString }))]).nullish(),
            images: z.array(z.looseObject({ image_url: z.looseObject({ url: nullishString }).nullish() })).nullish(),
            tool_calls: z
              .array(z.looseObject({ id: nullishString, function: z.looseObject({ name: nullishString, arguments: z.unknown() }).nullish() }))
              .nullish(),
          })
          .nullish(),
        finish_reason: nullishString,
      }),
    )
    .nullish(),
  usage: z
    .looseObject({
      prompt_tokens: nullishCount,
      completion_tokens: nullishCount,
      total_tokens: nullishCount,
      completion_tokens_details: z.looseObject({ reasoning_tokens: nullishCount }).nullish(),
    })
    .nullish(),
  // OpenRouter's numeric code; other OpenAI-compatible servers put a string there.
  error: z.looseObject({ message: nullishString, code: z.union([z.number(), z.string()]).nullish() }).nullish(),
});
type ChatReply = z.infer<typeof ChatReply>;

export class OpenRouterProvider implements ToolCallingProvider, ImageProvider {
  readonly kind = 'aggregator' as const;
  private readonly options: OpenRouterOptions;

  constructor(options: OpenRouterOptions) {
    this.options = options;
  }

  private async completions(body: Record<string, unknown>, signal: AbortSignal | undefined): Promise<ChatReply> {
    const headers: Record<string, string> = {};
    if (this.options.apiKey) headers.authorization = `Bearer ${this.options.apiKey}`;
    if (this.options.referer) headers['http-referer'] = this.options.referer;
    if (this.options.title) headers['x-title'] = this.options.title;
    const reply = await callProvider({
      provider: 'aggregator',
      schema: ChatReply,
      url: `${(this.options.baseUrl ?? 'https://openrouter.ai/api/v1').replace(/\/$/, '')}/chat/completions`,
      headers,
      json: body,
      timeoutMs: this.options.timeoutMs,
      retries: this.options.retries,
      backoffMs: this.options.backoffMs,
      maxBackoffMs: this.options.maxBackoffMs,
      signal,
    });
    // OpenRouter reports some upstream failures as 200 with an error object.
    const { error } = reply.body;
    if (error) {
      const status = typeof error.code === 'number' ? error.code : undefined;
      throw new ProviderError('aggregator', 'http', `the aggregator reported: ${error.message ?? 'an error'}`, { status });
    }
    return reply.body;
  }

  async generateText(request: TextRequest): Promise<TextResult> {
    const params = request.params ?? {};
    const body: Record<string, unknown> = {
      model: request.model,
      messages: [...(request.system ? [{ role: 'system', content: request.system }] : []), { role: 'user', content: request.prompt }],
    };
    addSampling(body, params);
    if (request.json) body.response_format = { type: 'json_object' };
    const reply = await this.completions(body, request.signal);
    const message = reply.choices?.[0]?.message;
    if (!message) throw new ProviderError('aggregator', 'malformed', 'the aggregator returned no choices');
    const text =
      typeof message.content === 'string' ? message.content : Array.isArray(message.content) ? message.content.map((part) => part.text ?? '').join('') : '';
    const input = reply.usage?.prompt_tokens ?? estimateTokens(request.system + request.prompt);
    const output = reply.usage?.completion_tokens ?? estimateTokens(text);
    return {
      text,
      provider: 'aggregator',
      model: request.model,
      usage: {
        input_tokens: input,
        output_tokens: output,
        thinking_tokens: reply.usage?.completion_tokens_details?.reasoning_tokens ?? 0,
        total_tokens: reply.usage?.total_tokens ?? input + output,
      },
      dropped_params: NATIVE_ONLY_PARAMS.filter((name) => params[name] !== undefined),
    };
  }

  /**
   * A turn with tools offered: OpenAI's `tools` (`type: function`) with `tool_choice: auto`. The model may
   * answer with several `tool_calls` at once; their `arguments` arrive as JSON text. Tool results go back
   * as `role: tool` messages naming the call's id.
   */
  async chat(request: ChatRequest): Promise<ChatResult> {
    const params = request.params ?? {};
    const body: Record<string, unknown> = { model: request.model, messages: request.messages.map(wireMessage) };
    if (request.tools.length > 0) {
      body.tools = request.tools.map((tool) => ({
        type: 'function',
        function: { name: tool.name, description: tool.description, parameters: tool.parameters },
      }));
      body.tool_choice = 'auto';
    }
    addSampling(body, params);
    const reply = await this.completions(body, request.signal);
    const choice = reply.choices?.[0];
    const message = choice?.message;
    if (!message) throw new ProviderError('aggregator', 'malformed', 'the aggregator returned no choices');
    const text =
      typeof message.content === 'string' ? message.content : Array.isArray(message.content) ? message.content.map((part) => part.text ?? '').join('') : '';
    const calls: ToolCall[] = (message.tool_calls ?? []).map((call, index) => {
      const name = call.function?.name;
      if (typeof name !== 'string' || !name) throw new ProviderError('aggregator', 'malformed', 'the aggregator sent a tool call without a function name');
      return { id: call.id || `call_${index}`, name, ...readToolArguments(call.function?.arguments), ...(call.id ? {} : { synthetic_id: true }) };
    });
    const input = reply.usage?.prompt_tokens ?? estimateTokens(JSON.stringify(body.messages));
    const output = reply.usage?.completion_tokens ?? estimateTokens(text + JSON.stringify(message.tool_calls ?? []));
    return {
      text,
      tool_calls: calls,
      provider: 'aggregator',
      model: request.model,
      usage: {
        input_tokens: input,
        output_tokens: output,
        thinking_tokens: reply.usage?.completion_tokens_details?.reasoning_tokens ?? 0,
        total_tokens: reply.usage?.total_tokens ?? input + output,
      },
      finish_reason: choice?.finish_reason ?? (calls.length > 0 ? 'tool_calls' : 'stop'),
    };
  }

  /** Image models through chat completions with `modalities: ["image", "text"]`; images come back as data URLs. */
  async generateImage(request: ImageRequest): Promise<ImageResult> {
    const reply = await this.completions(
      {
        model: request.model,
        messages: [{ role: 'user', content: request.negative_prompt ? `${request.prompt}\nAvoid: ${request.negative_prompt}` : request.prompt }],
        modalities: ['image', 'text'],
        ...(request.aspect_ratio ? { image_config: { aspect_ratio: request.aspect_ratio } } : {}),
      },
      request.signal,
    );
    const url = reply.choices?.[0]?.message?.images?.[0]?.image_url?.url;
    if (!url) throw new ProviderError('aggregator', 'malformed', 'the aggregator returned no image');
    const input = reply.usage?.prompt_tokens ?? estimateTokens(request.prompt);
    const output = reply.usage?.completion_tokens ?? 0;
    const usage = { input_tokens: input, output_tokens: output, thinking_tokens: 0, total_tokens: input + output };
    const match = /^data:([^;,]+);base64,(.*)$/s.exec(url);
    if (match) return { provider: 'aggregator', model: request.model, data: Buffer.from(match[2] as string, 'base64'), mime_type: match[1] as string, usage };
    return { provider: 'aggregator', model: request.model, url, mime_type: 'image/png', usage };
  }
}

traceModelCalls(OpenRouterProvider, { generateText: 'chat', chat: 'chat', generateImage: 'chat' });

/** The sampling parameters chat completions take, copied onto a request body. */
function addSampling(body: Record<string, unknown>, params: SamplingParams): void {
  for (const name of ['temperature', 'max_tokens', 'top_p', 'top_k', 'frequency_penalty', 'presence_penalty', 'repetition_penalty'] as const) {
    if (params[name] !== undefined) body[name] = params[name];
  }
  if (params.stop?.length) body.stop = params.stop;
}

/** A conversation message in chat-completions form; an assistant turn's calls carry their arguments as JSON text. */
function wireMessage(message: ChatMessage): Record<string, unknown> {
  switch (message.role) {
    case 'assistant':
      return message.tool_calls?.length
        ? {
            role: 'assistant',
            content: message.content || null,
            tool_calls: message.tool_calls.map((call) => ({
              id: call.id,
              type: 'function',
              function: { name: call.name, arguments: JSON.stringify(call.arguments) },
            })),
          }
        : { role: 'assistant', content: message.content };
    case 'tool':
      return { role: 'tool', tool_call_id: message.tool_call_id, content: message.content };
    default:
      return { role: message.role, content: message.content };
  }
}
