// The operator's API, group tempora.dev version v1alpha1, laid out as a kubebuilder project's
// api/v1alpha1: the spec and status of TemporaGateway, GraphWorker, AgentPool and SimulationBudget. The types
// are generated from the CRDs in crds/ by ../generate.ts, and a test fails while they differ.
export type * from './zz_generated.types.ts';
