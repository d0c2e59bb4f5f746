// /metrics, /healthz and /readyz on one port (8090 by convention). node:http suffices for three fixed
// routes; the services' Koa stack would add nothing here.
import { createServer, type Server } from 'node:http';
import type { Registry } from 'prom-client';

export interface Probes {
  /** The process is alive and its event loop turns. */
  healthy(): boolean;
  /** Informer caches have synced and the operator is not shutting down. */
  ready(): boolean;
}

export function startHttpServer(port: number, registry: Registry, probes: Probes): Promise<Server> {
  const server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { Allow: 'GET, HEAD' }).end();
      return;
    }
    if (path === '/metrics') {
      registry.metrics().then(
        (text) => res.writeHead(200, { 'Content-Type': registry.contentType }).end(text),
        (err: unknown) => res.writeHead(500, { 'Content-Type': 'text/plain' }).end(String(err)),
      );
      return;
    }
    if (path === '/healthz' || path === '/readyz') {
      const ok = path === '/healthz' ? probes.healthy() : probes.ready();
      res.writeHead(ok ? 200 : 503, { 'Content-Type': 'text/plain' }).end(ok ? 'ok' : 'not ready');
      return;
    }
    res.writeHead(404, { 'Content-Type': 'text/plain' }).end('not found');
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, () => resolve(server));
  });
}
