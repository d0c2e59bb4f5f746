// A model vendor the platform's pods can reach: one OpenAI-compatible endpoint on the node's address (the
// aggregator's protocol, OPENROUTER_BASE_URL) in front of the host's stand-ins, which listen on loopback.
// The generation agents' calls (their system prompts name the agent) go to the recorded replies
// (stand-ins/model-vendors.ts), every other call to the simulation's stand-in (stand-ins/chat-model.ts).
// While slow, each call is answered only after its caller's `slowMs` (below the callers' own timeouts, so
// a slow call is never retried or redelivered); once fast, after `fastMs`, and the calls waiting are
// answered at once.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { NODE_ADDRESS } from '../k8s/node.ts';
import { FakeModel } from '../support/stand-ins/chat-model.ts';
import { FakeVendors } from '../support/stand-ins/model-vendors.ts';
import { agentOf, RECORDED } from '../support/stand-ins/recorded-replies.ts';

type Caller = 'agents' | 'others';

export interface ModelVendor {
  /** Its port on the node's address (exposed to the pods by a Service). */
  port: number;
  /** Calls answered, by caller. */
  answered: Record<Caller, number>;
  /** Calls waiting for their answer now, by caller. */
  waiting: Record<Caller, number>;
  /** Calls whose client went away before the answer (a stopping pod cancelling its work), by caller. */
  abandoned: Record<Caller, number>;
  slow(caller: Caller): void;
  /** Answers every waiting call of `caller` now, and the next ones quickly. */
  fast(caller: Caller): void;
  stop(): Promise<void>;
}

export async function startModelVendor({ slowMs, fastMs }: { slowMs: Record<Caller, number>; fastMs: number }): Promise<ModelVendor> {
  const vendors = await new FakeVendors().start();
  const model = await new FakeModel().start();
  const targets: Record<Caller, string> = { agents: vendors.url, others: model.url };
  const zero = () => ({ agents: 0, others: 0 });
  const answered = zero();
  const waiting = zero();
  const abandoned = zero();
  const slow = new Set<Caller>();
  /** Per caller, the wakers of the calls waiting while slow. */
  const sleepers: Record<Caller, Set<() => void>> = { agents: new Set(), others: new Set() };

  const pause = (caller: Caller) =>
    new Promise<void>((resolve) => {
      const wake = () => {
        clearTimeout(timer);
        sleepers[caller].delete(wake);
        resolve();
      };
      const timer = setTimeout(wake, slow.has(caller) ? slowMs[caller] : fastMs);
      if (slow.has(caller)) sleepers[caller].add(wake);
    });

  const handle = async (request: IncomingMessage, response: ServerResponse) => {
    const chunks: Buffer[] = [];
    for await (const chunk of request) chunks.push(chunk as Buffer);
    const raw = Buffer.concat(chunks);
    let system = '';
    try {
      const body = JSON.parse(raw.toString()) as { messages?: { role: string; content: unknown }[] };
      system = String(body.messages?.find((m) => m.role === 'system')?.content ?? '');
    } catch {
      // Not JSON: the stand-in behind answers it as it would.
    }
    const caller: Caller = agentOf(system) in RECORDED ? 'agents' : 'others';
    let gone = false;
    response.on('close', () => {
      if (!response.writableFinished) {
        gone = true;
        abandoned[caller]++;
      }
    });
    waiting[caller]++;
    try {
      await pause(caller);
    } finally {
      waiting[caller]--;
    }
    if (gone) return;
    const answer = await fetch(`${targets[caller]}${request.url}`, {
      method: request.method,
      headers: { 'content-type': String(request.headers['content-type'] ?? 'application/json') },
      body: raw,
    });
    const body = Buffer.from(await answer.arrayBuffer());
    response.writeHead(answer.status, { 'content-type': answer.headers.get('content-type') ?? 'application/json' });
    response.end(body);
    answered[caller]++;
  };

  const sockets = new Set<Socket>();
  const server = createServer((request, response) => {
    handle(request, response).catch((err: unknown) => {
      if (!response.headersSent) response.writeHead(502, { 'content-type': 'text/plain' });
      response.end(String(err));
    });
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, NODE_ADDRESS, resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    port,
    answered,
    waiting,
    abandoned,
    slow: (caller) => void slow.add(caller),
    fast(caller) {
      slow.delete(caller);
      for (const wake of [...sleepers[caller]]) wake();
    },
    async stop() {
      // Calls held slow are woken, so that no timer of theirs outlives the stand-in.
      for (const caller of ['agents', 'others'] as const) {
        slow.delete(caller);
        for (const wake of [...sleepers[caller]]) wake();
      }
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await Promise.all([vendors.stop(), model.stop()]);
    },
  };
}
