/** fast-gateway (npm) with its defaults: the bare Node proxy the issue compares against. */
import type { AddressInfo } from 'node:net';
import gateway from 'fast-gateway';

const server = gateway({ routes: [{ prefix: '/api', prefixRewrite: '/api', target: process.env.TARGET! }] });
const listening = await server.start(0, '127.0.0.1');
process.stdout.write(`ready ${(listening.address() as AddressInfo).port}\n`);
