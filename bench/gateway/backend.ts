/** The trivial backend every contender proxies to: a fixed small JSON answer, keep-alive. */
import { createServer } from 'node:http';

const body = JSON.stringify({ ok: true, service: 'bench-backend' });
const server = createServer((_request, response) => {
  response.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  response.end(body);
});
server.keepAliveTimeout = 65_000;
server.listen(Number(process.env.PORT), '127.0.0.1', () => process.stdout.write('ready\n'));
