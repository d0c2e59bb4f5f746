import { lookup } from 'node:dns/promises';
import { BlockList, isIP } from 'node:net';
import { DEFAULT_PORTS, type ServiceName } from '../runtime/config.ts';

/**
 * The platform's own listeners, which no URL a user supplies (a callback) may reach, whatever an allow-list
 * lets through: a callback aimed at a peer's service-key route or at a stand-in's action (the Stripe
 * stand-in's `pay`) would otherwise be a request the platform makes to itself on a user's behalf. They are
 * every `*_URL` variable of the service's configuration or environment (the peers' GATEWAY_URL …
 * BILLING_URL, the Stripe API base, model providers' bases, PUBLIC_URL, the database and Redis), the peers
 * at their conventional loopback ports when unset, and are matched by port and by host: as written, or by
 * any address both resolve to, every loopback address counting as one (a listener on 127.0.0.1 or on all
 * interfaces answers 127.0.0.2, [::1] or 0.0.0.0 alike).
 */
export interface PlatformTarget {
  /** The variable that names it, e.g. STRIPE_API_URL. */
  name: string;
  /** Lower-case, without IPv6 brackets or a trailing dot. */
  host: string;
  port: number;
}

const DEFAULT_PORT_OF: Record<string, number> = { 'http:': 80, 'https:': 443, 'postgres:': 5432, 'postgresql:': 5432, 'redis:': 6379, 'rediss:': 6379 };
const URL_VARIABLE = /^[A-Z][A-Z0-9_]*_URL$/;

const portOf = (url: URL): number | undefined => (url.port ? Number(url.port) : DEFAULT_PORT_OF[url.protocol]);
const hostOf = (url: URL): string =>
  url.hostname
    .replace(/^\[|\]$/g, '')
    .replace(/\.$/, '')
    .toLowerCase();

/** The listeners named in `source` (a service's parsed configuration, or `process.env`). */
export function platformTargets(source: Readonly<Record<string, unknown>>): PlatformTarget[] {
  const named = new Map<string, string>();
  for (const service of Object.keys(DEFAULT_PORTS) as ServiceName[]) named.set(`${service.toUpperCase()}_URL`, `http://127.0.0.1:${DEFAULT_PORTS[service]}`);
  for (const [name, value] of Object.entries(source)) if (URL_VARIABLE.test(name) && typeof value === 'string' && value.trim()) named.set(name, value.trim());
  const targets: PlatformTarget[] = [];
  for (const [name, value] of named) {
    let url: URL;
    try {
      url = new URL(value);
    } catch {
      continue;
    }
    const port = portOf(url);
    if (url.hostname && port !== undefined) targets.push({ name, host: hostOf(url), port });
  }
  return targets;
}

const loopback = new BlockList();
loopback.addSubnet('127.0.0.0', 8, 'ipv4');
loopback.addAddress('0.0.0.0', 'ipv4');
loopback.addAddress('::1', 'ipv6');
loopback.addAddress('::', 'ipv6');

/** One spelling per address: every loopback (and unspecified) address is this machine, an IPv4-mapped IPv6 address its IPv4 one. */
function addressKey(address: string): string {
  const family = isIP(address);
  if (family === 0) return address.toLowerCase();
  if (loopback.check(address, family === 4 ? 'ipv4' : 'ipv6')) return 'this-machine';
  const mapped = /^::ffff:(?:(\d+\.\d+\.\d+\.\d+)|([0-9a-f]{1,4}):([0-9a-f]{1,4}))$/i.exec(address);
  if (!mapped) return address.toLowerCase();
  if (mapped[1]) return mapped[1];
  const high = parseInt(mapped[2]!, 16);
  const low = parseInt(mapped[3]!, 16);
  return [high >> 8, high & 255, low >> 8, low & 255].join('.');
}

const systemResolve = async (host: string): Promise<string[]> => (await lookup(host, { all: true })).map((entry) => entry.address);

/** Which of the platform's listeners a URL reaches. */
export class PlatformTargets {
  private readonly targets: readonly PlatformTarget[];
  private readonly resolve: (host: string) => Promise<string[]>;

  /** `resolve` looks up the platform's own host names, afresh at every check (DNS may change). */
  constructor(targets: readonly PlatformTarget[], resolve: (host: string) => Promise<string[]> = systemResolve) {
    this.targets = targets;
    this.resolve = resolve;
  }

  /**
   * The listener `url` reaches, by its host as written or by `addresses` (what its host resolved to, or the
   * one address a connection is about to dial); undefined when it reaches none.
   */
  async reached(url: URL, addresses: readonly string[]): Promise<PlatformTarget | undefined> {
    const port = portOf(url);
    const candidates = this.targets.filter((target) => target.port === port);
    if (candidates.length === 0) return undefined;
    const host = hostOf(url);
    const literal = candidates.find((target) => target.host === host);
    if (literal) return literal;
    const wanted = new Set([host, ...addresses].filter((entry) => isIP(entry)).map(addressKey));
    for (const target of candidates) {
      const own = isIP(target.host) ? [target.host] : await this.resolve(target.host).catch((): string[] => []);
      if (own.some((address) => wanted.has(addressKey(address)))) return target;
    }
    return undefined;
  }
}

/** Why a callback to `target` is refused (the problem's detail and its field's message). */
export function platformTargetRefusal(target: PlatformTarget): string {
  return `the callback URL reaches the platform's own ${target.name} (${target.host.includes(':') ? `[${target.host}]` : target.host}:${target.port}); callbacks may not call the platform's services or stand-ins`;
}
