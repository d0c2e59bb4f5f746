import type { IncomingMessage, ServerResponse } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { listenStandIn, type StandIn } from '../http.ts';
import { agentOf, PNG, RECORDED } from './recorded-replies.ts';

/**
 * Local servers speaking the vendors' HTTP protocols: Gemini generateContent (native), OpenAI-compatible
 * chat completions (aggregator), Stability's SD3 endpoint (image vendor) and Pollinations (free images).
 * Replies are the recorded agent outputs; scripted faults (429 with Retry-After, 5xx, hangs, connection
 * resets, malformed JSON or a body that is not JSON, late answers, invalid agent output) are queued per
 * vendor and agent, or stand for every call until reset.
 */
export type Vendor = 'native' | 'aggregator' | 'image_vendor' | 'free_image';

export type Fault =
  | { kind: 'status'; status: number; retryAfter?: string; body?: string }
  | { kind: 'hang' }
  /** Closes the connection with a TCP reset once the request has arrived. */
  | { kind: 'reset' }
  | { kind: 'malformed' }
  /** 200, `application/json`, and a body that is not JSON (a proxy's error page). */
  | { kind: 'garbage' }
  /** Answers well, late. */
  | { kind: 'slow'; ms: number }
  | { kind: 'invalid-output'; text: string }
  | { kind: 'output'; value: unknown };

export interface Recorded {
  vendor: Vendor;
  agent: string;
  path: string;
  headers: IncomingMessage['headers'];
  body: any;
  form?: Record<string, string>;
  at: number;
  /** The fault the call met, or `answered`. */
  what: Fault['kind'] | 'answered';
}

export class FakeVendors {
  private server: StandIn | undefined;
  url = '';
  readonly requests: Recorded[] = [];
  /** Faults by `${vendor}:${agent}` or `${vendor}:*`, consumed in order. */
  private readonly faults = new Map<string, Fault[]>();
  /** Faults by the same keys that meet every call, once the queued ones are spent, until `reset`. */
  private readonly standing = new Map<string, Fault>();
  /** Added to every reply (ms), for concurrency and cancellation tests. */
  latencyMs = 0;

  async start(): Promise<this> {
    this.server = await listenStandIn((request, response) => void this.handle(request, response).catch(() => response.destroy()));
    this.url = this.server.url;
    return this;
  }

  async stop(): Promise<void> {
    await this.server?.stop();
  }

  fail(vendor: Vendor, agent: string, ...faults: Fault[]): void {
    const key = `${vendor}:${agent}`;
    this.faults.set(key, [...(this.faults.get(key) ?? []), ...faults]);
  }

  /** `fault` for every call of `agent` (or `*`) at `vendor`, until `reset`. */
  always(vendor: Vendor, agent: string, fault: Fault): void {
    this.standing.set(`${vendor}:${agent}`, fault);
  }

  reset(): void {
    this.requests.length = 0;
    this.faults.clear();
    this.standing.clear();
    this.latencyMs = 0;
  }

  /** Calls of `vendor` (and `agent` when given) that arrived at `since` (ms epoch) or later. */
  of(vendor: Vendor, agent?: string, since = 0): Recorded[] {
    return this.requests.filter((entry) => entry.at >= since && entry.vendor === vendor && (agent === undefined || entry.agent === agent));
  }

  private nextFault(vendor: Vendor, agent: string): Fault | undefined {
    const keys = [`${vendor}:${agent}`, `${vendor}:*`];
    for (const key of keys) {
      const queue = this.faults.get(key);
      if (queue?.length) return queue.shift();
    }
    for (const key of keys) if (this.standing.has(key)) return this.standing.get(key);
    return undefined;
  }

  private async handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of request) chunks.push(chunk as Buffer);
    const raw = Buffer.concat(chunks);
    const path = request.url ?? '/';
    let vendor: Vendor;
    let body: any = {};
    let form: Record<string, string> | undefined;
    let agent = 'unknown';
    if (/\/models\/[^/]+:generateContent$/.test(path)) {
      vendor = 'native';
      body = JSON.parse(raw.toString() || '{}');
      agent = body.generationConfig?.responseModalities?.includes('IMAGE') ? 'ImageGen' : agentOf(body.systemInstruction?.parts?.[0]?.text ?? '');
    } else if (path.endsWith('/chat/completions')) {
      vendor = 'aggregator';
      body = JSON.parse(raw.toString() || '{}');
      agent = body.modalities?.includes('image') ? 'ImageGen' : agentOf(body.messages?.find((m: any) => m.role === 'system')?.content ?? '');
    } else if (path.startsWith('/v2beta/stable-image/generate/sd3')) {
      vendor = 'image_vendor';
      agent = 'ImageGen';
      form = Object.fromEntries(
        [...(await new Response(raw, { headers: { 'content-type': String(request.headers['content-type']) } }).formData()).entries()].map(([k, v]) => [
          k,
          String(v),
        ]),
      );
    } else if (path.startsWith('/prompt/')) {
      vendor = 'free_image';
      agent = 'ImageGen';
    } else {
      response.writeHead(404).end();
      return;
    }
    const fault = this.nextFault(vendor, agent);
    this.requests.push({ vendor, agent, path, headers: request.headers, body, form, at: Date.now(), what: fault?.kind ?? 'answered' });
    if (this.latencyMs) await sleep(this.latencyMs);
    if (fault?.kind === 'hang') return; // never answers; the client's timeout or cancellation ends it
    if (fault?.kind === 'reset') {
      request.socket.resetAndDestroy();
      return;
    }
    if (fault?.kind === 'slow') await sleep(fault.ms);
    if (fault?.kind === 'status') {
      response.writeHead(fault.status, { 'content-type': 'application/json', ...(fault.retryAfter ? { 'retry-after': fault.retryAfter } : {}) });
      response.end(fault.body ?? JSON.stringify({ error: { message: `scripted ${fault.status}` } }));
      return;
    }
    if (fault?.kind === 'malformed' || fault?.kind === 'garbage') {
      response.writeHead(200, { 'content-type': 'application/json' });
      response.end(fault.kind === 'malformed' ? '{"candidates": [ {"content": ' : '<html><body><h1>502 Bad Gateway</h1>upstream connect error</body></html>');
      return;
    }
    const text = fault?.kind === 'invalid-output' ? fault.text : JSON.stringify(fault?.kind === 'output' ? fault.value : (RECORDED[agent] ?? {}));
    if (vendor === 'native') {
      if (agent === 'ImageGen') {
        return json(response, {
          candidates: [{ content: { parts: [{ inlineData: { mimeType: 'image/png', data: PNG.toString('base64') } }] } }],
          usageMetadata: { promptTokenCount: 12, candidatesTokenCount: 1290, totalTokenCount: 1302 },
        });
      }
      return json(response, {
        candidates: [
          {
            content: { role: 'model', parts: [{ text: 'thinking about it', thought: true }, { text }] },
            finishReason: 'STOP',
            ...(agent === 'Grounding'
              ? { groundingMetadata: { groundingChunks: [{ web: { uri: 'https://en.wikipedia.org/wiki/Apollo_11', title: 'Apollo 11 - Wikipedia' } }] } }
              : {}),
          },
        ],
        usageMetadata: { promptTokenCount: 100, candidatesTokenCount: 50, thoughtsTokenCount: 7, totalTokenCount: 157 },
      });
    }
    if (vendor === 'aggregator') {
      if (agent === 'ImageGen') {
        return json(response, {
          choices: [
            {
              message: {
                role: 'assistant',
                content: '',
                images: [{ type: 'image_url', image_url: { url: `data:image/png;base64,${PNG.toString('base64')}` } }],
              },
            },
          ],
          usage: { prompt_tokens: 10, completion_tokens: 1000, total_tokens: 1010 },
        });
      }
      return json(response, {
        id: 'gen-1',
        model: body.model,
        choices: [{ index: 0, message: { role: 'assistant', content: text }, finish_reason: 'stop' }],
        usage: { prompt_tokens: 80, completion_tokens: 40, total_tokens: 120 },
      });
    }
    if (vendor === 'image_vendor') return json(response, { image: PNG.toString('base64'), finish_reason: 'SUCCESS', seed: 42 });
    response.writeHead(200, { 'content-type': 'image/jpeg' });
    response.end(PNG);
  }
}

function json(response: ServerResponse, value: unknown): void {
  response.writeHead(200, { 'content-type': 'application/json' });
  response.end(JSON.stringify(value));
}
