// Kinds that depend on each other without owning one another: no owner reference brings their events to
// the controller that needs them, so each relation below maps one kind's change to the owners it concerns.
import type { Controller } from './controller.ts';
import type { Informer } from './kube/informer.ts';
import { type KubeObject, objectKey, type Secret } from './kube/object.ts';
import type { ResourceType } from './kube/resources.ts';
import * as R from './kube/resources.ts';
import type { OwnerInformers } from './reconcilers/context.ts';
import { referencedSecrets } from './reconcilers/gateway-secrets.ts';

/** The custom kinds' informers and controllers, as the operator holds them. */
export interface Kinds {
  owners: OwnerInformers;
  controllers: readonly Controller[];
}

const controllerOf = (kinds: Kinds, resource: ResourceType) => kinds.controllers.find((c) => c.resource === resource)!;

/** A kind that names its TemporaGateway: GraphWorker, AgentPool, SimulationBudget. */
type NamingGateway = KubeObject & { spec: { gatewayRef: string } };

/** Enqueues each resource of `controller`'s kind (`informer`'s) in `namespace` whose `spec.gatewayRef` names `gateway`. */
function enqueueNaming(informer: Pick<Informer<NamingGateway>, 'list'>, controller: Controller, namespace: string | undefined, gateway: string): void {
  for (const obj of informer.list()) {
    if (obj.metadata.namespace === namespace && obj.spec.gatewayRef === gateway) controller.enqueue(namespace, obj.metadata.name);
  }
}

/**
 * A TemporaGateway → the GraphWorkers, AgentPools and SimulationBudgets naming it (its state, keys, tracing,
 * its simulation service). Its status changes often and concerns none of them: only a new generation (or its
 * coming and going) does. `forget` drops what the operator remembers of a deleted TemporaGateway's Secrets.
 */
export function watchGatewayDependents(kinds: Kinds, forget: (namespace: string | undefined, name: string) => void): void {
  const dependents = [
    { informer: kinds.owners.workers, controller: controllerOf(kinds, R.GraphWorker) },
    { informer: kinds.owners.pools, controller: controllerOf(kinds, R.AgentPool) },
    { informer: kinds.owners.budgets, controller: controllerOf(kinds, R.SimulationBudget) },
  ];
  const generations = new Map<string, number | undefined>();
  kinds.owners.gateways.onEvent((event, gw) => {
    const key = objectKey(gw.metadata.namespace, gw.metadata.name);
    if (event !== 'delete' && generations.get(key) === gw.metadata.generation) return;
    if (event === 'delete') {
      generations.delete(key);
      forget(gw.metadata.namespace, gw.metadata.name);
    } else generations.set(key, gw.metadata.generation);
    for (const d of dependents) enqueueNaming(d.informer, d.controller, gw.metadata.namespace, gw.metadata.name);
  });
}

/**
 * A Secret the operator fills (or that still waits to be) → the TemporaGateways naming it, reconciled at once
 * rather than at their next minute's check (gateway-secrets.ts).
 */
export function watchGeneratedSecrets(kinds: Kinds, generated: Informer<Secret>): void {
  const gateways = controllerOf(kinds, R.TemporaGateway);
  generated.onEvent((_event, secret) => {
    for (const gw of kinds.owners.gateways.list()) {
      if (gw.metadata.namespace === secret.metadata.namespace && referencedSecrets(gw).some((r) => r.secret === secret.metadata.name)) {
        gateways.enqueue(gw.metadata.namespace, gw.metadata.name);
      }
    }
  });
}

/**
 * A SimulationBudget → its TemporaGateway (also the one it named before), whose simulation pods' budgets
 * ConfigMap its spec is; its status, written at every change of spend, concerns no TemporaGateway.
 */
export function watchBudgetGateways(kinds: Kinds): void {
  const gateways = controllerOf(kinds, R.TemporaGateway);
  const refs = new Map<string, { generation: number | undefined; gatewayRef: string }>();
  kinds.owners.budgets.onEvent((event, budget) => {
    const key = objectKey(budget.metadata.namespace, budget.metadata.name);
    const before = refs.get(key);
    if (event !== 'delete' && before?.generation === budget.metadata.generation && !budget.metadata.deletionTimestamp) return;
    if (event === 'delete') refs.delete(key);
    else refs.set(key, { generation: budget.metadata.generation, gatewayRef: budget.spec.gatewayRef });
    for (const ref of new Set([budget.spec.gatewayRef, before?.gatewayRef])) if (ref !== undefined) gateways.enqueue(budget.metadata.namespace, ref);
  });
}

/**
 * An AgentPool → its TemporaGateway (whose generation pods' agent pool it is) and the other pools naming that
 * TemporaGateway (only the oldest serves); also the TemporaGateway it named before its spec changed.
 */
export function watchPoolGateways(kinds: Kinds): void {
  const [gateways, pools] = [controllerOf(kinds, R.TemporaGateway), controllerOf(kinds, R.AgentPool)];
  const poolGateways = new Map<string, string>();
  kinds.owners.pools.onEvent((event, pool) => {
    const key = objectKey(pool.metadata.namespace, pool.metadata.name);
    const before = poolGateways.get(key);
    if (event === 'delete') poolGateways.delete(key);
    else poolGateways.set(key, pool.spec.gatewayRef);
    for (const ref of new Set([pool.spec.gatewayRef, before])) {
      if (ref === undefined) continue;
      gateways.enqueue(pool.metadata.namespace, ref);
      enqueueNaming(kinds.owners.pools, pools, pool.metadata.namespace, ref);
    }
  });
}
