// What ties the kinds together: a GraphWorker or an AgentPool names its TemporaGateway (spec.gatewayRef), works
// against that TemporaGateway's services and state, and takes from it what it does not set itself. One
// AgentPool serves a TemporaGateway: the generation pods hand their agent tasks to it.
import type { AgentPool, SecretKeyRef, TemporaGateway } from '../api/v1alpha1/index.ts';
import type { ReconcileContext } from './context.ts';

export function gatewayOf(ctx: ReconcileContext, namespace: string | undefined, name: string): TemporaGateway | undefined {
  const gw = ctx.owners.gateways.get(namespace, name);
  return gw?.metadata.deletionTimestamp ? undefined : gw;
}

/** Both stores set: the services share them and may run many replicas; otherwise each runs one, with state of its own. */
export function hasExternalState(gw: TemporaGateway): boolean {
  return Boolean(gw.spec.database && gw.spec.redis);
}

/**
 * The prefix of every Redis key of one TemporaGateway's platform (its services' and its workers'), so that
 * several Gateways can share one Redis: rate limits and agent task streams stay apart.
 */
export function redisKeyPrefix(namespace: string | undefined, gateway: string): string {
  return `tempora:${namespace ?? 'default'}:${gateway}`.replace(/[^A-Za-z0-9:_-]/g, '_');
}

/** The Redis an AgentPool's tasks flow through: its own, else its TemporaGateway's. */
export function poolRedis(pool: AgentPool, gw: TemporaGateway | undefined): SecretKeyRef | undefined {
  return pool.spec.redis ?? gw?.spec.redis;
}

/** The AgentPool that serves a TemporaGateway: the oldest one naming it that has a Redis to work through. */
export function servingPool(ctx: ReconcileContext, gw: TemporaGateway): AgentPool | undefined {
  return ctx.owners.pools
    .list()
    .filter(
      (p) => p.metadata.namespace === gw.metadata.namespace && p.spec.gatewayRef === gw.metadata.name && !p.metadata.deletionTimestamp && poolRedis(p, gw),
    )
    .sort(
      (a, b) => (a.metadata.creationTimestamp ?? '').localeCompare(b.metadata.creationTimestamp ?? '') || a.metadata.name.localeCompare(b.metadata.name),
    )[0];
}
