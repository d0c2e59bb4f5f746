/**
 * A bare node:http + undici proxy that does only what the spec's header contract asks of every proxied
 * call (strip credentials, identity and hop-by-hop fields; set X-Forwarded-*, X-Request-ID, traceparent,
 * X-User-ID/Tier and the upstream key; answer with the request id, Vary, three rate-limit and two credit
 * fields), with fixed values and no authentication, limits or metrics: what the contract alone costs.
 */
import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Agent } from 'undici';

const agent = new Agent({ connections: 256, keepAliveTimeout: 30_000, pipelining: 1 });
const target = new URL(process.env.TARGET!);
const STRIPPED = new Set([
  'host',
  'authorization',
  'connection',
  'keep-alive',
  'x-user-id',
  'x-service-key',
  'te',
  'upgrade',
  'proxy-connection',
  'transfer-encoding',
  'trailer',
]);
const server = createServer((req, res) => {
  const raw = req.rawHeaders;
  const fields: string[] = [];
  for (let i = 0; i < raw.length; i += 2) if (!STRIPPED.has(raw[i]!.toLowerCase())) fields.push(raw[i]!, raw[i + 1]!);
  const id = randomUUID();
  fields.push('x-forwarded-for', req.socket.remoteAddress ?? '', 'x-forwarded-proto', 'http', 'x-forwarded-host', 'localhost', 'x-request-id', id);
  fields.push('traceparent', '00-0123456789abcdef0123456789abcdef-0123456789abcdef-01', 'x-user-id', 'u1', 'x-user-tier', 'pro', 'x-service-key', 'k');
  // undici's dispatch handler, as the gateway's proxy uses it: the answer written straight into `res`.
  agent.dispatch(
    { origin: target.origin, path: req.url!, method: 'GET', headers: fields },
    {
      // undici tells the handler API apart by this method's presence.
      onRequestStart() {},
      onResponseStart(_controller, statusCode, headers) {
        const out = ['X-Request-ID', id, 'Vary', 'Origin', 'X-RateLimit-Limit', '100', 'X-RateLimit-Remaining', '99', 'X-RateLimit-Reset', '60'];
        for (const name in headers) {
          const value = headers[name];
          if (typeof value === 'string' && name !== 'connection' && name !== 'keep-alive') out.push(name, value);
        }
        out.push('X-Credits-Charged', '0', 'X-Balance-After', '50');
        res.writeHead(statusCode, out);
      },
      onResponseData(controller, chunk) {
        if (!res.write(chunk)) {
          controller.pause();
          res.once('drain', () => controller.resume());
        }
      },
      onResponseEnd() {
        res.end();
      },
      onResponseError() {
        if (res.headersSent) res.destroy();
        else res.writeHead(502).end();
      },
    },
  );
});
server.keepAliveTimeout = 65_000;
server.listen(0, '127.0.0.1', () => process.stdout.write(`ready ${(server.address() as AddressInfo).port}\n`));
