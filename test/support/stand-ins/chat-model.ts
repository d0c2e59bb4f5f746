import type { IncomingMessage, ServerResponse } from 'node:http';
import { listenStandIn, type StandIn } from '../http.ts';

/** What the simulation asked: the call's kind (from its system prompt), its prompt as JSON, its model. */
export interface ModelRequest {
  action: 'entity' | 'scene' | 'plan' | 'antecedents' | 'director';
  model: string;
  maxTokens: number;
  prompt: any;
  raw: any;
}

export type Responder = (request: ModelRequest) => unknown;

const actionOf = (system: string): ModelRequest['action'] =>
  system.includes('simulate one entity')
    ? 'entity'
    : system.includes('write what happens')
      ? 'scene'
      : system.includes('simulation plan')
        ? 'plan'
        : system.includes('reason backwards')
          ? 'antecedents'
          : 'director';

/** Terse, valid answers for every kind of call: the fields the schemas require, nothing more. */
export const minimalReply: Responder = (request) => {
  switch (request.action) {
    case 'entity':
      return {
        mood: 'steady',
        summary: `${request.prompt.entity?.name ?? 'someone'} waits`,
        action: `${request.prompt.entity?.name ?? 'someone'} waits`,
        uses_knowledge: [],
      };
    case 'scene':
      return {};
    case 'plan':
      return {
        title: 'A planned scenario',
        place: 'somewhere',
        era: 'now',
        entities: [
          { name: 'Ada', role: 'leader', kind: 'person', importance: 'principal', goals: ['decide'] },
          { name: 'Ben', role: 'rival', kind: 'person', importance: 'supporting', goals: ['oppose'] },
          { name: 'The Storm', role: 'weather', kind: 'force', importance: 'minor', goals: ['blow'] },
        ],
        facts: [
          { fact: 'A decision is due.', holders: [0, 1] },
          { fact: 'Ben has a secret ally.', holders: [1] },
        ],
        timepoints: [
          { label: 'Start', time: 'day 1', hour: 9 },
          { label: 'Middle', time: 'day 2', hour: 12 },
          { label: 'End', time: 'day 3', hour: 15 },
        ],
      };
    case 'antecedents':
      return {
        candidates: [
          { description: 'an earlier moment', plausibility: 0.6 },
          { description: 'another earlier moment', plausibility: 0.4 },
        ],
      };
    case 'director':
      return { acts: [0.2, 0.5, 0.9, 0.6, 0.3].map((tension, index) => ({ name: `Act ${index + 1}`, beat: 'a beat', tension })) };
  }
};

/**
 * A local OpenAI-compatible chat-completions server (the aggregator's protocol) standing in for a model
 * vendor: a fixed latency per call, an optional gate that holds every answer until opened, a responder,
 * and a record of every call, including calls whose client went away before the answer.
 */
export class FakeModel {
  private server: StandIn | undefined;
  url = '';
  latencyMs = 0;
  responder: Responder = minimalReply;
  readonly requests: ModelRequest[] = [];
  /** Calls whose client disconnected before they were answered. */
  abandoned = 0;
  inFlight = 0;
  private gate: Promise<void> | null = null;
  private openGate: (() => void) | null = null;
  private readonly arrivals: Array<() => void> = [];

  async start(): Promise<this> {
    this.server = await listenStandIn((request, response) => void this.handle(request, response));
    this.url = this.server.url;
    return this;
  }

  async stop(): Promise<void> {
    this.release();
    await this.server?.stop();
  }

  /** Holds every answer from now until `release`. */
  hold(): void {
    if (!this.gate) this.gate = new Promise((resolve) => (this.openGate = resolve));
  }

  release(): void {
    this.openGate?.();
    this.gate = null;
    this.openGate = null;
  }

  /** Resolves when `count` calls in all have arrived. */
  async arrived(count: number, timeoutMs = 15_000): Promise<void> {
    const started = Date.now();
    while (this.requests.length < count) {
      if (Date.now() - started > timeoutMs) throw new Error(`only ${this.requests.length} of ${count} model calls arrived`);
      await new Promise<void>((resolve) => {
        this.arrivals.push(resolve);
        setTimeout(resolve, 50);
      });
    }
  }

  private async handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of request) chunks.push(chunk as Buffer);
    const body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
    const system = body.messages.find((message: { role: string }) => message.role === 'system')?.content ?? '';
    const user = body.messages.find((message: { role: string }) => message.role === 'user')?.content ?? '';
    let prompt: any;
    try {
      prompt = JSON.parse(user.split('\n')[0]);
    } catch {
      prompt = user;
    }
    const call: ModelRequest = { action: actionOf(system), model: body.model, maxTokens: body.max_tokens, prompt, raw: body };
    this.requests.push(call);
    for (const resolve of this.arrivals.splice(0)) resolve();
    this.inFlight += 1;
    let gone = false;
    response.on('close', () => {
      if (!response.writableFinished) {
        gone = true;
        this.abandoned += 1;
      }
    });
    try {
      if (this.latencyMs) await new Promise((resolve) => setTimeout(resolve, this.latencyMs));
      if (this.gate) await this.gate;
      if (gone) return;
      const content = JSON.stringify(this.responder(call));
      const completion = Math.ceil(content.length / 4);
      response.writeHead(200, { 'content-type': 'application/json' });
      response.end(
        JSON.stringify({
          id: `chatcmpl-${this.requests.length}`,
          object: 'chat.completion',
          model: body.model,
          choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: 'stop' }],
          usage: {
            prompt_tokens: Math.ceil((system.length + user.length) / 4),
            completion_tokens: completion,
            total_tokens: Math.ceil((system.length + user.length) / 4) + completion,
          },
        }),
      );
    } finally {
      this.inFlight -= 1;
    }
  }
}
