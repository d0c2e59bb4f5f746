/** A backend stand-in for proxy tests: records what reaches it and answers as each test asks. */

import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';

export interface Recorded {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  body: string;
}

export type Handler = (request: IncomingMessage, response: ServerResponse, body: string) => void | Promise<void>;

export interface Upstream {
  url: string;
  name: string;
  requests: Recorded[];
  /**
   * Handlers by "METHOD /path" (query excluded) or "METHOD /prefix*"; default: 200 JSON echo, and the
   * account-data contract's answers of a service holding nothing of the user.
   */
  on(route: string, handler: Handler): void;
  reset(): void;
  close(): Promise<void>;
}

export async function startUpstream(name: string): Promise<Upstream> {
  const requests: Recorded[] = [];
  const handlers = new Map<string, Handler>();
  const server = createServer(async (request, response) => {
    const path = (request.url ?? '/').split('?')[0]!;
    const streamed = path.endsWith('/upload-stream');
    let body = '';
    if (!streamed) {
      const chunks: Buffer[] = [];
      for await (const chunk of request) chunks.push(chunk as Buffer);
      body = Buffer.concat(chunks).toString('utf8');
    }
    requests.push({ method: request.method ?? '', url: request.url ?? '', headers: request.headers, body });
    const exact = handlers.get(`${request.method} ${path}`);
    const prefix = [...handlers.entries()].find(([key]) => key.endsWith('*') && `${request.method} ${path}`.startsWith(key.slice(0, -1)))?.[1];
    const handler = exact ?? prefix;
    if (handler) return handler(request, response, body);
    // A service holding no data of the user, as the account-data contract answers it.
    if (/^\/api\/v1\/users\/[^/]+\/data$/.test(path) && (request.method === 'DELETE' || request.method === 'GET')) {
      response.writeHead(200, { 'content-type': 'application/json' });
      return void response.end(
        JSON.stringify(
          request.method === 'DELETE' ? { service: name, deleted: {}, kept: {}, notes: [] } : { service: name, kind: 'data', items: [], next_cursor: null },
        ),
      );
    }
    response.writeHead(200, { 'content-type': 'application/json', 'x-upstream': name });
    response.end(JSON.stringify({ upstream: name, method: request.method, url: request.url }));
  });
  server.keepAliveTimeout = 1000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    name,
    requests,
    on: (route, handler) => handlers.set(route, handler),
    reset: () => {
      requests.length = 0;
      handlers.clear();
    },
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** The most a TCP socket's buffer in one direction may grow to (the third field of the sysctl). */
function tcpBufferMax(sysctl: 'tcp_rmem' | 'tcp_wmem'): number {
  return Number(readFileSync(`/proc/sys/net/ipv4/${sysctl}`, 'utf8').trim().split(/\s+/)[2]);
}

const PATTERN = Buffer.alloc(251 * 256, 0);
for (let i = 0; i < PATTERN.length; i += 1) PATTERN[i] = i % 251;

/**
 * An answer body that goes on until the test calls `finish()`, written with backpressure, for proving that
 * a reader who stops reading holds its writer back through the gateway. A fixed-size answer proves nothing:
 * loopback buffers grow to tcp_rmem's and tcp_wmem's maxima (32 MiB each way on some kernels), so one could
 * sit in the kernel whole. `heldBack` resolves with the bytes written once a write has waited half a second
 * for 'drain', or with undefined when more went out than every buffer on the way could hold. Byte i is
 * i % 251 (see `readPattern`).
 */
export class EndlessBody {
  readonly heldBack: Promise<number | undefined>;
  /** Bytes written so far; all of them once the answer ended. */
  sent = 0;
  private stopped = false;
  private report!: (written: number | undefined) => void;

  constructor() {
    this.heldBack = new Promise((resolve) => {
      this.report = resolve;
    });
  }

  async writeTo(res: ServerResponse): Promise<void> {
    const cap = 2 * (tcpBufferMax('tcp_rmem') + tcpBufferMax('tcp_wmem')) + 64 * 1024 * 1024;
    let held = false;
    while (!this.stopped && this.sent < cap) {
      this.sent += PATTERN.length;
      if (res.write(PATTERN)) continue;
      const drained = once(res, 'drain');
      if (!held && !(await Promise.race([drained.then(() => true), sleep(500).then(() => false)]))) {
        held = true;
        this.report(this.sent);
      }
      await drained;
    }
    if (!held) this.report(undefined);
    res.end();
  }

  finish(): void {
    this.stopped = true;
  }
}

/** Reads an `EndlessBody` to its end, checking every byte is in its place; the number of bytes. */
export async function readPattern(body: AsyncIterable<Buffer>): Promise<number> {
  let received = 0;
  for await (const data of body) {
    for (let i = 0; i < data.length; i += 1) {
      if (data[i] !== (received + i) % 251) throw new Error(`byte ${received + i} is out of order`);
    }
    received += data.length;
  }
  return received;
}
