import { createHmac } from 'node:crypto';
import { type LookupAddress, type LookupOptions, lookup as lookupCallback } from 'node:dns';
import { lookup } from 'node:dns/promises';
import { BlockList, isIP } from 'node:net';
import { type PlatformTarget, PlatformTargets, platformTargetRefusal, platformTargets } from '@tempora/kit/http';
import type { Logger } from '@tempora/kit/observability';
import { Agent, fetch as undiciFetch } from 'undici';

/**
 * Callbacks: the result of an async generation POSTed to callback_url, signed with HMAC-SHA256 over
 * `${timestamp}.${body}` (hex, header `X-Tempora-Signature: sha256=<hex>`, timestamp in `X-Tempora-Timestamp`,
 * Unix seconds), retried with exponential back-off. Loopback, private, link-local and other non-public
 * addresses are refused unless allow-listed, and the platform's own services and stand-ins always.
 */
export function signCallback(secret: string, timestamp: number, body: string): string {
  return `sha256=${createHmac('sha256', secret).update(`${timestamp}.${body}`).digest('hex')}`;
}

const blocked = new BlockList();
for (const [network, prefix] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
] as const) {
  blocked.addSubnet(network, prefix, 'ipv4');
}
// Besides loopback, unique-local, link-local and multicast: the ranges that carry an IPv4 address inside an
// IPv6 one (IPv4-compatible, NAT64, 6to4, Teredo) and the discard prefix, none of them a callback receiver.
for (const [network, prefix] of [
  ['::', 96],
  ['::1', 128],
  ['64:ff9b::', 96],
  ['64:ff9b:1::', 48],
  ['100::', 64],
  ['2001::', 32],
  ['2002::', 16],
  ['fc00::', 7],
  ['fe80::', 10],
  ['ff00::', 8],
] as const) {
  blocked.addSubnet(network, prefix, 'ipv6');
}

export function isPrivateAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 0) return true;
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped) return blocked.check(mapped[1] as string, 'ipv4');
  return blocked.check(address, family === 4 ? 'ipv4' : 'ipv6');
}

/**
 * Allow-list entries: a host name, an IP, or a CIDR (`10.0.0.0/8`); `host:port` pins a port. The platform's
 * own listeners (`platform`, by default those named in this process's environment, which its configuration
 * is read from) are refused before the allow-list is consulted.
 */
export class CallbackPolicy {
  private readonly hosts = new Set<string>();
  private readonly networks = new BlockList();
  private readonly resolve: (host: string) => Promise<string[]>;
  private readonly platform: PlatformTargets;

  constructor(allowlist: readonly string[], resolve?: (host: string) => Promise<string[]>, platform: readonly PlatformTarget[] = platformTargets(process.env)) {
    for (const entry of allowlist) {
      const [network, prefix] = entry.split('/');
      if (prefix && isIP(network as string)) this.networks.addSubnet(network as string, Number(prefix), isIP(network as string) === 4 ? 'ipv4' : 'ipv6');
      else this.hosts.add(entry.toLowerCase());
    }
    this.resolve = resolve ?? (async (host) => (await lookup(host, { all: true })).map((entry) => entry.address));
    this.platform = new PlatformTargets(platform);
  }

  private allowed(url: URL, address?: string): boolean {
    const host = url.hostname.replace(/^\[|\]$/g, '').toLowerCase();
    if (this.hosts.has(host) || this.hosts.has(`${host}:${url.port || (url.protocol === 'https:' ? '443' : '80')}`)) return true;
    if (address && isIP(address) && this.networks.check(address, isIP(address) === 4 ? 'ipv4' : 'ipv6')) return true;
    return false;
  }

  /**
   * Connections for one callback URL whose every address is checked as the connection resolves it: `check`
   * resolves the name before, but a name can answer a public address then and a private one at connect
   * time (DNS rebinding), so the address actually dialled is held to the same rule.
   */
  dispatcher(raw: string): Agent {
    const url = new URL(raw);
    const guarded = (
      hostname: string,
      options: LookupOptions,
      callback: (error: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void,
    ) => {
      lookupCallback(hostname, { ...options, all: true }, (error, addresses) => {
        if (error) return callback(error, '');
        const refuse = (reason: string) => callback(Object.assign(new Error(reason), { code: 'ECONNREFUSED' }), '');
        void this.platform
          .reached(
            url,
            addresses.map((entry) => entry.address),
          )
          .then(
            (own) => {
              if (own) return refuse(`${platformTargetRefusal(own)}, resolved when connecting`);
              const refused = addresses.find((entry) => isPrivateAddress(entry.address) && !this.allowed(url, entry.address));
              if (refused) return refuse(`the callback host resolved to a loopback or private address (${refused.address}) when connecting`);
              if (options.all) return callback(null, addresses);
              return callback(null, addresses[0]!.address, addresses[0]!.family);
            },
            () => refuse("the callback host could not be checked against the platform's own addresses when connecting"),
          );
      });
    };
    return new Agent({ connect: { lookup: guarded as never } });
  }

  /** Undefined when the URL may be called; otherwise why not. */
  async check(raw: string): Promise<string | undefined> {
    let url: URL;
    try {
      url = new URL(raw);
    } catch {
      return 'not a URL';
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') return 'only http and https callbacks are allowed';
    if (url.username || url.password) return 'credentials in the callback URL are not allowed';
    const host = url.hostname.replace(/^\[|\]$/g, '');
    // Resolved before the allow-list is consulted: an allow-listed name may still lead to the platform itself.
    const addresses = isIP(host) ? [host] : await this.resolve(host).catch((): string[] => []);
    const own = await this.platform.reached(url, addresses);
    if (own) return platformTargetRefusal(own);
    if (this.allowed(url)) return undefined;
    if (addresses.length === 0) return `the host ${host} does not resolve`;
    for (const address of addresses) {
      if (isPrivateAddress(address) && !this.allowed(url, address))
        return `the callback host resolves to a loopback or private address (${address}); allow-list it in CALLBACK_ALLOWLIST`;
    }
    return undefined;
  }
}

export interface DeliveryOptions {
  secret: string;
  policy: CallbackPolicy;
  maxAttempts: number;
  backoffMs: number;
  timeoutMs: number;
  logger: Logger;
  onAttempt?: (attempt: number) => void;
  /** Stops the attempts (and the one under way): the job was handed to another replica, which delivers it. */
  signal?: AbortSignal;
}

/** Delivers one callback; resolves with the outcome after success or the last attempt. */
export async function deliverCallback(
  url: string,
  jobId: string,
  payload: unknown,
  options: DeliveryOptions,
): Promise<{ delivered: boolean; attempts: number; error?: string }> {
  const body = JSON.stringify(payload);
  let error = '';
  for (let attempt = 1; attempt <= options.maxAttempts; attempt += 1) {
    if (options.signal?.aborted) return { delivered: false, attempts: attempt - 1, error: 'stopped: the job was handed to another replica' };
    options.onAttempt?.(attempt);
    // Checked at every attempt: a name that resolved to a public address may not later point inside.
    const refused = await options.policy.check(url);
    if (refused) return { delivered: false, attempts: attempt, error: refused };
    const timestamp = Math.floor(Date.now() / 1000);
    const dispatcher = options.policy.dispatcher(url);
    try {
      // Redirects are not followed: a receiver could otherwise send the signed result on to any address.
      const response = await undiciFetch(url, {
        dispatcher,
        method: 'POST',
        redirect: 'manual',
        headers: {
          'content-type': 'application/json',
          'user-agent': 'tempora-generation-callback',
          'x-tempora-job-id': jobId,
          'x-tempora-timestamp': String(timestamp),
          'x-tempora-signature': signCallback(options.secret, timestamp, body),
          'x-tempora-attempt': String(attempt),
        },
        body,
        signal: options.signal ? AbortSignal.any([options.signal, AbortSignal.timeout(options.timeoutMs)]) : AbortSignal.timeout(options.timeoutMs),
      });
      await response.arrayBuffer().catch(() => undefined);
      if (response.ok) return { delivered: true, attempts: attempt };
      error = `the receiver answered ${response.status}`;
      if (response.status < 500 && response.status !== 429 && response.status !== 408) return { delivered: false, attempts: attempt, error };
    } catch (caught) {
      const cause = (caught as Error & { cause?: Error }).cause;
      error = `the receiver could not be reached: ${cause?.message ?? (caught as Error).message}`;
    } finally {
      void dispatcher.close().catch(() => {});
    }
    if (attempt < options.maxAttempts) await pause(options.backoffMs * 2 ** (attempt - 1), options.signal);
  }
  options.logger.warn({ jobId, error }, 'callback not delivered');
  return { delivered: false, attempts: options.maxAttempts, error };
}

/** Waits `ms`, or less when `signal` aborts. */
function pause(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
  });
}
