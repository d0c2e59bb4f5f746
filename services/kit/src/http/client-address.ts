import type { IncomingMessage } from 'node:http';
import proxyAddr from 'proxy-addr';
import type { BaseConfig } from '../runtime/config.ts';

/** Whether `address`, reached `hop` steps from the socket (the peer is 0), is a proxy whose X-Forwarded-For entry is believed. */
export type ProxyTrust = (address: string, hop: number) => boolean;

/** The address of the client that made a request, as far as the trusted proxies vouch for it. */
export type ClientAddress = (req: IncomingMessage) => string;

export type ProxyConfig = Pick<BaseConfig, 'TRUSTED_PROXIES' | 'TRUSTED_PROXY_HOPS'>;

/** TRUSTED_PROXIES, walked through at most TRUSTED_PROXY_HOPS deep. */
export function createProxyTrust(config: ProxyConfig): ProxyTrust {
  if (config.TRUSTED_PROXIES.length === 0 || config.TRUSTED_PROXY_HOPS === 0) return () => false;
  const listed = proxyAddr.compile(config.TRUSTED_PROXIES);
  return (address, hop) => hop < config.TRUSTED_PROXY_HOPS && listed(address, hop);
}

/**
 * The one decision of who the client is, for every service's `ctx.ip` and for whatever else must agree
 * with it (the gateway's sign-in limits, the X-Forwarded-For it sends on): the socket's peer, unless that
 * is a trusted proxy, in which case the X-Forwarded-For entry it appended, and so on leftwards while the
 * entries are themselves trusted proxies (proxy-addr, as Express decides). Entries a client wrote itself
 * sit left of the first untrusted address and are never reached.
 */
export function createClientAddress(config: ProxyConfig): ClientAddress {
  const trust = createProxyTrust(config);
  return (req) => proxyAddr(req, trust) ?? req.socket.remoteAddress ?? '';
}
