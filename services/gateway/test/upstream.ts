/** A backend stand-in for proxy tests: records what reaches it and answers as each test asks. */
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

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
  /** Handlers by "METHOD /path" (query excluded) or "METHOD /prefix*"; default: 200 JSON echo. */
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
