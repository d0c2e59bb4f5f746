/**
 * The platform's components as its monitors name them: every ServiceMonitor and PodMonitor the operator
 * makes (and the operator chart's own) sets the target label `tempora_component` to one of these. Rules and
 * dashboards select series by it, so they never read another workload's `up`, `http_server_*`,
 * `controller_runtime_*` or `workqueue_*`, which share the platform's metric names.
 */
export const COMPONENT_LABEL = 'tempora_component';

/** The six services of a TemporaGateway, each one Deployment with a ServiceMonitor. */
export const SERVICES = ['gateway', 'generation', 'graph', 'simulation', 'conductor', 'billing'] as const;

/** Every component: the services, the workers of an AgentPool and of the continuous GraphWorkers, the operator. */
export const COMPONENTS = [...SERVICES, 'agent-pool', 'graph-worker', 'operator'] as const;
export type Component = (typeof COMPONENTS)[number];

/** A matcher for series of these components: `tempora_component="graph"` or `tempora_component=~"graph|graph-worker"`. */
export const ofComponents = (...components: readonly Component[]): string =>
  components.length === 1 ? `${COMPONENT_LABEL}="${components[0]}"` : `${COMPONENT_LABEL}=~"${components.join('|')}"`;

/** Any Tempora component. */
export const TEMPORA = ofComponents(...COMPONENTS);
