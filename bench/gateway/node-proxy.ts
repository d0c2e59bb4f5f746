/**
 * A bare Node reverse proxy (node:http, keep-alive agent, streams piped): the stand-in for fast-gateway,
 * which could not be installed from the registry here (its dependency fast-proxy-lite@^1.1.3 is missing).
 */
import { Agent, createServer, request } from 'node:http';

const target = new URL(process.env.TARGET!);
const agent = new Agent({ keepAlive: true, maxSockets: 256 });
const server = createServer((incoming, outgoing) => {
  const upstream = request(
    { host: target.hostname, port: target.port, method: incoming.method, path: incoming.url, headers: { ...incoming.headers, host: target.host }, agent },
    (answer) => {
      outgoing.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(outgoing);
    },
  );
  upstream.on('error', () => {
    outgoing.writeHead(502).end();
  });
  incoming.pipe(upstream);
});
server.keepAliveTimeout = 65_000;
server.listen(Number(process.env.PORT), '127.0.0.1', () => process.stdout.write('ready\n'));
