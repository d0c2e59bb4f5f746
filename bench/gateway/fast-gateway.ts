/** fast-gateway (npm) with its defaults: the bare Node proxy the issue compares against. */
import gateway from 'fast-gateway';

const server = gateway({ routes: [{ prefix: '/api', prefixRewrite: '/api', target: process.env.TARGET! }] });
await server.start(Number(process.env.PORT), '127.0.0.1');
process.stdout.write('ready\n');
