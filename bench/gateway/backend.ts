/** The trivial backend every contender proxies to: a fixed small JSON answer, keep-alive. */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

const body = JSON.stringify({ ok: true, service: 'bench-backend' });
const server = createServer((_request, response) => {
  response.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  response.end(body);
});
server.keepAliveTimeout = 65_000;
// Port 0: its own at once; the bench reads it from the `ready` line.
server.listen(0, '127.0.0.1', () => process.stdout.write(`ready ${(server.address() as AddressInfo).port}\n`));
