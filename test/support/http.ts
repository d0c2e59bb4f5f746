import { createServer, type RequestListener } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

/** Small fetch wrapper for tests: JSON in, status, headers and parsed body out. */
export interface Reply<T = any> {
  status: number;
  headers: Headers;
  body: T;
}

export async function request<T = any>(
  base: string,
  path: string,
  init: { method?: string; headers?: Record<string, string>; body?: unknown; raw?: string } = {},
): Promise<Reply<T>> {
  const headers: Record<string, string> = { ...init.headers };
  let body: string | undefined = init.raw;
  if (init.body !== undefined) {
    headers['content-type'] ??= 'application/json';
    body = JSON.stringify(init.body);
  }
  const response = await fetch(`${base}${path}`, { method: init.method ?? (body === undefined ? 'GET' : 'POST'), headers, body });
  const text = await response.text();
  const type = response.headers.get('content-type') ?? '';
  return { status: response.status, headers: response.headers, body: (type.includes('json') && text ? JSON.parse(text) : text) as T };
}

/** A test's stand-in for a server it talks to, on a loopback port. */
export interface StandIn {
  url: string;
  /** Closes the server and cuts the connections clients still hold (keep-alive, calls it never answers). */
  stop(): Promise<void>;
}

export async function listenStandIn(handler: RequestListener): Promise<StandIn> {
  const sockets = new Set<Socket>();
  const server = createServer(handler);
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    async stop() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
