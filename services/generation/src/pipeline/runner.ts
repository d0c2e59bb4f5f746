import type { PoolStats } from '../pool/stats.ts';
import type { ProviderSet } from '../providers.ts';
import { type AgentOutcome, type AgentTask, executeTask } from './task.ts';

/** Runs agent tasks: in this process (below), or on the Redis agent pool (pool/coordinator.ts). */
export interface AgentRunner {
  mode: 'in-process' | 'redis';
  run(task: AgentTask, signal: AbortSignal): Promise<AgentOutcome>;
  /** Tasks waiting or running on the pool (0 in-process). */
  depth(): Promise<number>;
  /** The pool's backlog and live workers; undefined in-process, where there is no pool to describe. */
  stats(): Promise<PoolStats | undefined>;
  close(): Promise<void>;
}

export class InProcessRunner implements AgentRunner {
  readonly mode = 'in-process' as const;
  private readonly providers: ProviderSet;

  constructor(providers: ProviderSet) {
    this.providers = providers;
  }

  run(task: AgentTask, signal: AbortSignal): Promise<AgentOutcome> {
    return executeTask(task, this.providers, signal);
  }

  async depth() {
    return 0;
  }

  async stats() {
    return undefined;
  }

  async close() {}
}
