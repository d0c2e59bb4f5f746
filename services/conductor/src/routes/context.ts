import { conflict, notFound, Problem } from '@tempora/kit/http';
import { type ConductorService, ConversationBusy, ConversationNotFound, ModelUnavailable, NothingToDecide, PausedCallNotFound } from '../conductor-service.ts';

export interface ConductorRouteDeps {
  service: ConductorService;
}

/** The service's refusals as problems (the MCP tool answers the same refusals as `{error, suggestion}`). */
export function asProblem(error: unknown): unknown {
  if (error instanceof ConversationNotFound || error instanceof PausedCallNotFound) return notFound(error.message);
  if (error instanceof ConversationBusy || error instanceof NothingToDecide) return conflict(error.message);
  if (error instanceof ModelUnavailable) return new Problem(502, error.message);
  return error;
}
