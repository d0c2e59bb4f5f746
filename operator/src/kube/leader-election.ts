// Leader election on a coordination.k8s.io/v1 Lease, following client-go's leaderelection package
// (client-node has no equivalent): candidates retry every retryPeriod; a lease is taken over only when
// its holder has not renewed it for leaseDuration as observed on this instance's own clock (so clock skew
// between instances does not matter); the leader gives up when it cannot renew within renewDeadline; on
// a graceful stop the leader releases the lease so another instance takes over at once.
import type { Logger } from 'pino';
import type { OperatorMetrics } from '../metrics.ts';
import { isConflict, isNotFound, type KubeClient } from './client.ts';
import type { Lease as LeaseObject } from './object.ts';
import { Lease } from './resources.ts';

export interface LeaderElectionOptions {
  client: KubeClient;
  namespace: string;
  name: string;
  identity: string;
  log: Logger;
  metrics: OperatorMetrics;
  leaseDurationMs?: number;
  renewDeadlineMs?: number;
  retryPeriodMs?: number;
  onStartedLeading: () => void;
  onStoppedLeading: () => void;
}

type LeaseSpec = NonNullable<LeaseObject['spec']>;

export class LeaderElector {
  readonly #o: Required<Omit<LeaderElectionOptions, 'onStartedLeading' | 'onStoppedLeading'>> &
    Pick<LeaderElectionOptions, 'onStartedLeading' | 'onStoppedLeading'>;
  #leading = false;
  #stopped = false;
  #timer: NodeJS.Timeout | undefined;
  #observed: { record: string; at: number } | undefined;
  #lastRenew = 0;
  #running: Promise<void> | undefined;

  constructor(options: LeaderElectionOptions) {
    this.#o = { leaseDurationMs: 15_000, renewDeadlineMs: 10_000, retryPeriodMs: 2_000, ...options };
    // A standby says so from the start, rather than by having no series.
    options.metrics.leaderStatus.set({ name: options.name }, 0);
  }

  get isLeader(): boolean {
    return this.#leading;
  }

  start(): void {
    this.#stopped = false;
    this.#schedule(0);
  }

  /** Stops campaigning; a leader releases the lease so the next candidate need not wait it out. */
  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#timer) clearTimeout(this.#timer);
    await this.#running;
    if (this.#leading) {
      await this.#release().catch((err: unknown) => this.#o.log.warn({ err: String(err) }, 'releasing the lease failed'));
      this.#setLeading(false);
    }
  }

  #schedule(ms: number): void {
    if (this.#stopped) return;
    this.#timer = setTimeout(() => {
      this.#running = this.#tick().finally(() => this.#schedule(this.#o.retryPeriodMs));
    }, ms);
  }

  async #tick(): Promise<void> {
    let acquired = false;
    try {
      acquired = await this.#tryAcquireOrRenew();
    } catch (err) {
      this.#o.log.debug({ err: String(err) }, 'lease acquire/renew failed');
    }
    if (this.#stopped) return;
    if (acquired) {
      this.#lastRenew = Date.now();
      if (!this.#leading) this.#setLeading(true);
    } else if (this.#leading && Date.now() - this.#lastRenew > this.#o.renewDeadlineMs) {
      this.#o.log.error('could not renew the lease within the renew deadline; stepping down');
      this.#setLeading(false);
    }
  }

  #setLeading(leading: boolean): void {
    this.#leading = leading;
    this.#o.metrics.leaderStatus.set({ name: this.#o.name }, leading ? 1 : 0);
    this.#o.log.info({ identity: this.#o.identity, lease: `${this.#o.namespace}/${this.#o.name}` }, leading ? 'became leader' : 'stopped leading');
    if (leading) this.#o.onStartedLeading();
    else this.#o.onStoppedLeading();
  }

  async #tryAcquireOrRenew(): Promise<boolean> {
    const { client, namespace, name, identity } = this.#o;
    const now = new Date();
    const existing = await client.getOrUndefined(Lease, namespace, name);
    const leaseSeconds = Math.round(this.#o.leaseDurationMs / 1000);
    if (!existing) {
      await client
        .create(Lease, namespace, {
          apiVersion: 'coordination.k8s.io/v1',
          kind: 'Lease',
          metadata: { name, namespace },
          spec: { holderIdentity: identity, leaseDurationSeconds: leaseSeconds, acquireTime: micro(now), renewTime: micro(now), leaseTransitions: 0 },
        })
        .catch((err: unknown) => {
          if (isConflict(err)) return undefined;
          throw err;
        });
      return (await client.get(Lease, namespace, name)).spec?.holderIdentity === identity;
    }
    const spec: LeaseSpec = existing.spec ?? {};
    const record = JSON.stringify(spec);
    if (this.#observed?.record !== record) this.#observed = { record, at: Date.now() };
    const holder = spec.holderIdentity ?? '';
    const duration = (spec.leaseDurationSeconds ?? leaseSeconds) * 1000;
    if (holder !== '' && holder !== identity && this.#observed.at + duration > Date.now()) return false;

    const next: LeaseSpec = {
      holderIdentity: identity,
      leaseDurationSeconds: leaseSeconds,
      acquireTime: holder === identity ? spec.acquireTime : micro(now),
      renewTime: micro(now),
      leaseTransitions: holder === identity ? (spec.leaseTransitions ?? 0) : (spec.leaseTransitions ?? 0) + 1,
    };
    try {
      // The update carries the resourceVersion read above, so two candidates cannot both win.
      const updated = await client.replace(Lease, namespace, name, { ...existing, spec: next });
      this.#observed = { record: JSON.stringify(updated.spec ?? {}), at: Date.now() };
      return true;
    } catch (err) {
      if (isConflict(err) || isNotFound(err)) return false;
      throw err;
    }
  }

  async #release(): Promise<void> {
    const { client, namespace, name, identity } = this.#o;
    const existing = await client.get(Lease, namespace, name);
    const spec: LeaseSpec = existing.spec ?? {};
    if (spec.holderIdentity !== identity) return;
    const now = micro(new Date());
    await client.replace(Lease, namespace, name, {
      ...existing,
      spec: { ...spec, holderIdentity: '', leaseDurationSeconds: 1, renewTime: now, acquireTime: now },
    });
  }
}

/** Lease times are MicroTime: RFC 3339 with exactly six fractional digits. */
function micro(d: Date): string {
  return d.toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');
}
