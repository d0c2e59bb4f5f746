import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Seen {
  method: string;
  path: string;
  headers: IncomingMessage['headers'];
  body: string;
}

/** A tiny HTTP server that answers as the test scripts it: how a client meets a server that answers wrongly. */
export async function scriptedServer(answer: (request: Seen, response: ServerResponse, count: number) => void) {
  const seen: Seen[] = [];
  const server = createServer((request, response) => {
    let body = '';
    request.on('data', (chunk) => (body += chunk));
    request.on('end', () => {
      const record = { method: request.method!, path: request.url!, headers: request.headers, body };
      seen.push(record);
      answer(record, response, seen.length);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    seen,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

export function json(response: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) {
  response.writeHead(status, { 'content-type': status >= 400 ? 'application/problem+json' : 'application/json', ...headers });
  response.end(JSON.stringify(body));
}

export const problem = (status: number, title: string, detail: string) => ({ type: 'about:blank', title, status, detail });

export function simulationRun(id: string) {
  return {
    id,
    status: 'queued',
    mode: 'FORWARD',
    fidelity: 1,
    template: null,
    prompt: 'the printing press reaches Venice',
    mechanisms: [],
    progress: { steps_done: 0, steps_total: 4, percent: 0 },
    cost: { currency: 'USD', estimate_usd: 0.15, max_usd: 0.2, actual_usd: 0, calls: 0, tokens: { input: 0, output: 0, thinking: 0 } },
    budgets: [],
    partial: null,
    error: null,
    cancel_requested: false,
    created_at: '2026-01-01T00:00:00.000Z',
    started_at: null,
    finished_at: null,
    links: {
      self: `/api/v1/simulations/${id}`,
      result: `/api/v1/simulations/${id}/result`,
      events: `/api/v1/simulations/${id}/events`,
      cancel: `/api/v1/simulations/${id}/cancel`,
    },
  };
}
