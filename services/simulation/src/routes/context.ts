import { notFound } from '@tempora/kit/http';
import type { Context } from 'koa';
import { callerOf } from '../auth.ts';
import type { BudgetSource } from '../budget-source.ts';
import type { TemplateCatalog } from '../domain/templates.ts';
import type { RunRow, SimulationRepository } from '../repository.ts';
import type { Runner } from '../runner.ts';
import type { Simulations } from '../simulations.ts';

export interface RouteDeps {
  simulations: Simulations;
  repository: SimulationRepository;
  runner: Runner;
  catalog: TemplateCatalog;
  budgets: BudgetSource;
  version: string;
  maxWaitSeconds: number;
  heartbeatMs: number;
  streamPollMs: number;
  /** Where paid starts go instead (GATEWAY_URL). */
  gatewayUrl: string;
  /** SERVICE_KEY: the keys a priced operation from the gateway is signed with (requirePricedAs). */
  serviceKeys: readonly string[];
}

/** A run is visible to its owner and to services acting as themselves; to anyone else it does not exist. */
export async function visibleRun(ctx: Context, deps: RouteDeps, id: string): Promise<RunRow> {
  const caller = callerOf(ctx);
  const row = await deps.repository.run(id);
  if (!row || (row.owner !== caller.owner && !caller.service)) throw notFound(`no simulation ${id}`);
  return row;
}

/** A run read again while a request follows it: 404 once it is gone (deleted with its account meanwhile). */
export async function runAgain(deps: RouteDeps, id: string): Promise<RunRow> {
  const row = await deps.repository.run(id);
  if (!row) throw notFound(`simulation ${id} no longer exists (deleted with its account)`);
  return row;
}
