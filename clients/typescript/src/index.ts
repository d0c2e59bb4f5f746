export {
  type ConductorResponse,
  type CreatedApiKey,
  data,
  type GenerateRequest,
  type GenerationEvent,
  type Problem,
  type Scene,
  type SignIn,
  type SimulateRequest,
  type SimulationEvent,
  type SimulationRun,
  Tempora,
  type TemporaOptions,
  type TokenPair,
} from './client.ts';
export type { ServerEvent } from './events.ts';
export type { components, operations, paths } from './generated/api.ts';
export { InvalidAnswer, retryAfterSeconds, TemporaProblem } from './problems.ts';
export type { RetryPolicy } from './transport.ts';
