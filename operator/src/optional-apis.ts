// APIs a cluster may or may not serve, which change what the reconcilers want: the Prometheus Operator's
// ServiceMonitor and PodMonitor kinds and KEDA's ScaledObject (OPTIONAL_CHILDREN), and a metrics adapter
// (an external.metrics.k8s.io APIService, which the AgentPool's own HPA needs for queue depth). No watch says
// when one appears or goes away, so each is probed, and its answer trusted for a TTL.
import type { KubeClient } from './kube/client.ts';
import { apiVersionOf, OPTIONAL_CHILDREN, type ResourceType } from './kube/resources.ts';
import type { Features } from './reconcilers/context.ts';

type Probe = (fresh?: boolean) => Promise<boolean>;

export class OptionalApis implements Features {
  readonly #ttlMs: number;
  /** Every probe, each answering whether one optional API is there. */
  readonly #probes: Probe[] = [];
  readonly #served: Map<string, Probe>;
  readonly #externalMetrics: Probe;
  /** The answers at the last refresh, in the order of #probes. */
  #last: (boolean | undefined)[] = [];

  constructor(client: KubeClient, ttlMs: number) {
    this.#ttlMs = ttlMs;
    this.#served = new Map(OPTIONAL_CHILDREN.map((r) => [r.plural, this.#probe(() => client.serves(apiVersionOf(r), r.plural))]));
    this.#externalMetrics = this.#probe(() => client.listsGroup('external.metrics.k8s.io'));
  }

  serves(resource: ResourceType, fresh?: boolean): Promise<boolean> {
    const probe = this.#served.get(resource.plural);
    return probe ? probe(fresh) : Promise.reject(new Error(`${resource.kind} is not an optional child type`));
  }

  externalMetrics(fresh?: boolean): Promise<boolean> {
    return this.#externalMetrics(fresh);
  }

  /**
   * Probes every optional API again. True when one of them appeared or went away since the last refresh
   * (a probe that fails keeps its previous answer and counts as no change).
   */
  async refresh(): Promise<boolean> {
    const now = await Promise.all(this.#probes.map((p) => p(true).catch(() => undefined)));
    const before = this.#last;
    this.#last = now.map((v, i) => v ?? before[i]);
    return now.some((v, i) => v !== undefined && before[i] !== undefined && v !== before[i]);
  }

  #probe(ask: () => Promise<boolean>): Probe {
    let cached: { at: number; value: Promise<boolean> } | undefined;
    const probe = (fresh = false): Promise<boolean> => {
      if (!fresh && cached && Date.now() - cached.at < this.#ttlMs) return cached.value;
      const value = ask();
      const entry = { at: Date.now(), value };
      cached = entry;
      value.catch(() => {
        if (cached === entry) cached = undefined;
      });
      return value;
    };
    this.#probes.push(probe);
    return probe;
  }
}
