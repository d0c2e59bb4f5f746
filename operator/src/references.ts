// Kinds that depend on each other without owning one another: no owner reference brings their events to
// the controller that needs them, so each relation below maps one kind's change to the owners it concerns.
import type { AgentPool, SimulationBudget, TemporaGateway } from './api/v1alpha1/index.ts';
import type { Controller } from './controller.ts';
import type { Informer } from './kube/informer.ts';
import { objectKey } from './kube/object.ts';
import type { ResourceType } from './kube/resources.ts';
import * as R from './kube/resources.ts';
import { referencedSecrets } from './reconcilers/gateway-secrets.ts';

/** The custom kinds' informers (by plural) and controllers, as the operator holds them. */
export interface Kinds {
  owners: ReadonlyMap<string, Informer>;
  controllers: readonly Controller[];
}

const informerOf = (kinds: Kinds, resource: ResourceType) => kinds.owners.get(resource.plural)!;
const controllerOf = (kinds: Kinds, resource: ResourceType) => kinds.controllers.find((c) => c.resource === resource)!;

/** Enqueues each resource of `controller`'s kind in `namespace` whose `spec.gatewayRef` names `gateway`. */
function enqueueNaming(kinds: Kinds, controller: Controller, namespace: string | undefined, gateway: string): void {
  for (const obj of informerOf(kinds, controller.resource).list()) {
    if (obj.metadata.namespace === namespace && (obj.spec as { gatewayRef?: string } | undefined)?.gatewayRef === gateway)
      controller.enqueue(namespace, obj.metadata.name);
  }
}

/**
 * A TemporaGateway → the GraphWorkers, AgentPools and SimulationBudgets naming it (its state, keys, tracing,
 * its simulation service). Its status changes often and concerns none of them: only a new generation (or its
 * coming and going) does. `forget` drops what the operator remembers of a deleted TemporaGateway's Secrets.
 */
export function watchGatewayDependents(kinds: Kinds, forget: (namespace: string | undefined, name: string) => void): void {
  const dependents = [controllerOf(kinds, R.GraphWorker), controllerOf(kinds, R.AgentPool), controllerOf(kinds, R.SimulationBudget)];
  const generations = new Map<string, number | undefined>();
  informerOf(kinds, R.TemporaGateway).onEvent((event, obj) => {
    const gw = obj as TemporaGateway;
    const key = objectKey(gw.metadata.namespace, gw.metadata.name);
    if (event !== 'delete' && generations.get(key) === gw.metadata.generation) return;
    if (event === 'delete') {
      generations.delete(key);
      forget(gw.metadata.namespace, gw.metadata.name);
    } else generations.set(key, gw.metadata.generation);
    for (const c of dependents) enqueueNaming(kinds, c, gw.metadata.namespace, gw.metadata.name);
  });
}

/**
 * A Secret the operator fills (or that still waits to be) → the TemporaGateways naming it, reconciled at once
 * rather than at their next minute's check (gateway-secrets.ts).
 */
export function watchGeneratedSecrets(kinds: Kinds, generated: Informer): void {
  const gateways = controllerOf(kinds, R.TemporaGateway);
  generated.onEvent((_event, secret) => {
    for (const gw of informerOf(kinds, R.TemporaGateway).list() as TemporaGateway[]) {
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
  informerOf(kinds, R.SimulationBudget).onEvent((event, obj) => {
    const budget = obj as SimulationBudget;
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
  informerOf(kinds, R.AgentPool).onEvent((event, obj) => {
    const pool = obj as AgentPool;
    const key = objectKey(pool.metadata.namespace, pool.metadata.name);
    const before = poolGateways.get(key);
    if (event === 'delete') poolGateways.delete(key);
    else poolGateways.set(key, pool.spec.gatewayRef);
    for (const ref of new Set([pool.spec.gatewayRef, before])) {
      if (ref === undefined) continue;
      gateways.enqueue(pool.metadata.namespace, ref);
      enqueueNaming(kinds, pools, pool.metadata.namespace, ref);
    }
  });
}
