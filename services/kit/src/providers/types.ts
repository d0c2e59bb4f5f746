/**
 * Model providers shared by the services (conventions.md: the kit holds "model providers"). Each provider
 * speaks its vendor's real wire protocol; all share the retry/timeout helper in `http.ts`.
 */

/** Sampling parameters a caller may pass; each provider sends only those its protocol supports. */
export interface SamplingParams {
  temperature?: number;
  max_tokens?: number;
  top_p?: number;
  top_k?: number;
  stop?: string[];
  /** Aggregator only. */
  frequency_penalty?: number;
  /** Aggregator only. */
  presence_penalty?: number;
  /** Aggregator only (multiplicative). */
  repetition_penalty?: number;
  /** Native provider only. */
  thinking_level?: 'none' | 'low' | 'medium' | 'high';
}

export const AGGREGATOR_ONLY_PARAMS = ['frequency_penalty', 'presence_penalty', 'repetition_penalty'] as const;
export const NATIVE_ONLY_PARAMS = ['thinking_level'] as const;

export type ProviderKind = 'native' | 'aggregator' | 'image_vendor' | 'free_image' | 'offline';

export interface Usage {
  input_tokens: number;
  output_tokens: number;
  /** Reasoning tokens where the provider reports them (included in output_tokens). */
  thinking_tokens: number;
  total_tokens: number;
}

export const emptyUsage = (): Usage => ({ input_tokens: 0, output_tokens: 0, thinking_tokens: 0, total_tokens: 0 });

export function addUsage(into: Usage, more: Usage): Usage {
  into.input_tokens += more.input_tokens;
  into.output_tokens += more.output_tokens;
  into.thinking_tokens += more.thinking_tokens;
  into.total_tokens += more.total_tokens;
  return into;
}

export interface TextRequest {
  model: string;
  system: string;
  prompt: string;
  /** Ask for a JSON object as the whole reply (JSON mode where the protocol has one). */
  json?: boolean;
  params?: SamplingParams;
  /** Native provider: ground the answer with web search. */
  grounding?: boolean;
  signal?: AbortSignal;
  /** Offline provider: produces the deterministic reply (any JSON value); ignored by network providers. */
  synthesize?: () => unknown;
}

export interface Citation {
  title: string;
  url: string;
}

export interface TextResult {
  text: string;
  provider: ProviderKind;
  model: string;
  usage: Usage;
  /** Sources the provider attached (native grounding metadata). */
  citations?: Citation[];
  /** Parameters the caller asked for that this provider's protocol does not take. */
  dropped_params?: string[];
}

export interface ImageRequest {
  model: string;
  prompt: string;
  negative_prompt?: string;
  aspect_ratio?: string;
  seed?: number;
  signal?: AbortSignal;
}

export interface ImageResult {
  provider: ProviderKind;
  model: string;
  /** Either a remote URL or the bytes (the caller stores them and serves its own URL). */
  url?: string;
  data?: Buffer;
  mime_type: string;
  usage: Usage;
}

export interface TextProvider {
  kind: ProviderKind;
  generateText(request: TextRequest): Promise<TextResult>;
}

export interface ImageProvider {
  kind: ProviderKind;
  generateImage(request: ImageRequest): Promise<ImageResult>;
}

/**
 * Tool calling (the conductor's loop): the model is offered functions described by JSON Schema and answers
 * with text, with calls to some of them, or both. Each provider maps these onto its own wire protocol
 * (the aggregator's OpenAI-compatible `tools`/`tool_calls`, the native provider's function calling).
 */
export interface ToolSpec {
  name: string;
  description: string;
  /** A JSON Schema object (type, properties, required, enum, minimum, maximum, description): the subset both protocols read. */
  parameters: Record<string, unknown>;
}

/** A call the model asked for. */
export interface ToolCall {
  /** The provider's call id, or one made up in order when the protocol gave none (`synthetic_id`). */
  id: string;
  name: string;
  /** The arguments as a JSON object; `{}` when they could not be read (`arguments_error` then says why). */
  arguments: Record<string, unknown>;
  arguments_error?: string;
  /** True when `id` was made up here: the native protocol then matches answers by name and order, not id. */
  synthetic_id?: boolean;
  /** The native provider's thought signature of the part that held the call, handed back with it as received. */
  signature?: string;
}

export type ChatMessage =
  | { role: 'system'; content: string }
  | { role: 'user'; content: string }
  | { role: 'assistant'; content: string; tool_calls?: ToolCall[] }
  /** A tool's answer to the call `tool_call_id` (`name` is the tool's); `content` is JSON text. */
  | { role: 'tool'; tool_call_id: string; name: string; content: string };

/** One model turn: what it said and the tools it asked for (several may come in one turn). */
export interface ChatTurn {
  text: string;
  tool_calls: ToolCall[];
}

export interface ChatRequest {
  model: string;
  messages: ChatMessage[];
  tools: ToolSpec[];
  params?: SamplingParams;
  signal?: AbortSignal;
  /** Offline provider: decides the turn from the conversation (deterministically); ignored by network providers. */
  plan?: (messages: ChatMessage[]) => ChatTurn;
}

export interface ChatResult extends ChatTurn {
  provider: ProviderKind;
  model: string;
  usage: Usage;
  /** The protocol's own word for why the turn ended (`tool_calls`, `stop`, `STOP`, `MAX_TOKENS`, ...). */
  finish_reason: string;
}

/** A text provider that can also call tools. */
export interface ToolCallingProvider extends TextProvider {
  chat(request: ChatRequest): Promise<ChatResult>;
}

/** A tool result as the object the native protocol requires (a JSON object; anything else is wrapped). */
export function toolResultObject(content: string): Record<string, unknown> {
  try {
    const value: unknown = JSON.parse(content);
    if (value && typeof value === 'object' && !Array.isArray(value)) return value as Record<string, unknown>;
    return { result: value };
  } catch {
    return { result: content };
  }
}

/** Arguments as a model sent them (a JSON string, or already an object) read into a tool call's fields. */
export function readToolArguments(raw: unknown): Pick<ToolCall, 'arguments' | 'arguments_error'> {
  if (raw === undefined || raw === null || raw === '') return { arguments: {} };
  let value = raw;
  if (typeof raw === 'string') {
    try {
      value = JSON.parse(raw);
    } catch {
      return { arguments: {}, arguments_error: `the arguments are not valid JSON: ${raw.slice(0, 200)}` };
    }
  }
  if (!value || typeof value !== 'object' || Array.isArray(value)) return { arguments: {}, arguments_error: 'the arguments are not a JSON object' };
  return { arguments: value as Record<string, unknown> };
}

export type ProviderErrorCode = 'timeout' | 'http' | 'malformed' | 'network' | 'cancelled' | 'refused';

/** A provider call that failed after its retries; `status` is the upstream HTTP status when there was one. */
export class ProviderError extends Error {
  override name = 'ProviderError';
  readonly provider: ProviderKind;
  readonly code: ProviderErrorCode;
  readonly status: number | undefined;
  readonly attempts: number;

  constructor(provider: ProviderKind, code: ProviderErrorCode, message: string, options: { status?: number; attempts?: number } = {}) {
    super(message);
    this.provider = provider;
    this.code = code;
    this.status = options.status;
    this.attempts = options.attempts ?? 1;
  }
}

/** Rough token estimate (4 characters a token) for providers that report no usage. */
export const estimateTokens = (text: string): number => Math.max(1, Math.ceil(text.length / 4));
