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
