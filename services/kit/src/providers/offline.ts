import { createHash } from 'node:crypto';
import { traceModelCalls } from './telemetry.ts';
import {
  type ChatRequest,
  type ChatResult,
  estimateTokens,
  type ImageProvider,
  type ImageRequest,
  type ImageResult,
  type TextRequest,
  type TextResult,
  type ToolCallingProvider,
} from './types.ts';

/**
 * The offline provider: no network, deterministic. Text replies are whatever the caller's `synthesize`
 * returns (a service derives them from its own inputs), serialised as JSON; images are SVG renderings of
 * the prompt. Results are always marked `provider: offline`, model `offline`.
 */
export const OFFLINE_MODEL = 'offline';

/** A stable 32-bit seed from any strings (FNV-style over SHA-256), for deterministic choices. */
export function seedOf(...parts: string[]): number {
  return createHash('sha256').update(parts.join('\u0000')).digest().readUInt32BE(0);
}

/** Deterministic pseudo-random sequence (mulberry32) from a seed. */
export function sequence(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const escapeXml = (text: string) => text.replace(/[<>&"']/g, (c) => `&#${c.charCodeAt(0)};`);

export class OfflineProvider implements ToolCallingProvider, ImageProvider {
  readonly kind = 'offline' as const;

  async generateText(request: TextRequest): Promise<TextResult> {
    if (request.signal?.aborted) throw request.signal.reason;
    const value = request.synthesize ? request.synthesize() : { text: `offline reply to: ${request.prompt.slice(0, 200)}` };
    const text = typeof value === 'string' && !request.json ? value : JSON.stringify(value);
    const input = estimateTokens(request.system + request.prompt);
    const output = estimateTokens(text);
    return {
      text,
      provider: 'offline',
      model: OFFLINE_MODEL,
      usage: { input_tokens: input, output_tokens: output, thinking_tokens: 0, total_tokens: input + output },
      dropped_params: [],
    };
  }

  /** A tool-calling turn decided by the caller's `plan` (a deterministic planner); without one, a turn that calls nothing. */
  async chat(request: ChatRequest): Promise<ChatResult> {
    if (request.signal?.aborted) throw request.signal.reason;
    const turn = request.plan ? request.plan(request.messages) : { text: 'offline: no planner was given', tool_calls: [] };
    const input = estimateTokens(request.messages.map((message) => message.content).join('\n'));
    const output = estimateTokens(turn.text + JSON.stringify(turn.tool_calls));
    return {
      ...turn,
      provider: 'offline',
      model: OFFLINE_MODEL,
      usage: { input_tokens: input, output_tokens: output, thinking_tokens: 0, total_tokens: input + output },
      finish_reason: turn.tool_calls.length > 0 ? 'tool_calls' : 'stop',
    };
  }

  async generateImage(request: ImageRequest): Promise<ImageResult> {
    if (request.signal?.aborted) throw request.signal.reason;
    const next = sequence(request.seed ?? seedOf(request.prompt));
    const hue = Math.floor(next() * 360);
    const words = request.prompt.split(/\s+/).slice(0, 14).join(' ');
    const svg = [
      '<svg xmlns="http://www.w3.org/2000/svg" width="1344" height="768" viewBox="0 0 1344 768">',
      `<defs><linearGradient id="g" x1="0" y1="0" x2="1" y2="1"><stop offset="0" stop-color="hsl(${hue},45%,35%)"/><stop offset="1" stop-color="hsl(${(hue + 60) % 360},40%,15%)"/></linearGradient></defs>`,
      '<rect width="1344" height="768" fill="url(#g)"/>',
      `<text x="672" y="384" font-family="serif" font-size="36" fill="#f4ead5" text-anchor="middle">${escapeXml(words)}</text>`,
      '</svg>',
    ].join('');
    const input = estimateTokens(request.prompt);
    return {
      provider: 'offline',
      model: OFFLINE_MODEL,
      data: Buffer.from(svg, 'utf8'),
      mime_type: 'image/svg+xml',
      usage: { input_tokens: input, output_tokens: 0, thinking_tokens: 0, total_tokens: input },
    };
  }
}

traceModelCalls(OfflineProvider, { generateText: 'chat', chat: 'chat', generateImage: 'generate_content' });
