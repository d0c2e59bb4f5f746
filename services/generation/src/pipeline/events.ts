import type { ProviderKind, Usage } from '@tempora/kit/providers';
import { type AgentName, EVENT_ORDER } from '../agents/types.ts';

export type StepStatus = 'completed' | 'skipped' | 'failed';

/** One agent call as the scene's timings and the stream report it. */
export interface StepRecord {
  agent: AgentName;
  status: StepStatus;
  provider: ProviderKind | null;
  model: string | null;
  started_ms: number;
  duration_ms: number;
  attempts: number;
  tokens: Usage;
  /** CharacterBio: which character; Dialog/Critique: 2 for the revision round. */
  index?: number;
}

/** A stream event: one per reported agent, in EVENT_ORDER. */
export interface AgentEvent {
  agent: AgentName;
  status: StepStatus;
  duration_ms: number;
  elapsed_ms: number;
  provider: ProviderKind | null;
  model: string | null;
  tokens: { input: number; output: number; total: number };
  /** When the agent finished (epoch ms); the event may leave later, after the agents before it in the order. */
  completed_at: number;
  output?: unknown;
  warning?: string;
}

/** Reports completions in EVENT_ORDER however the dependency graph finishes them. */
export class OrderedReporter {
  private readonly ready = new Map<AgentName, AgentEvent>();
  private cursor = 0;
  private readonly emit: ((event: AgentEvent) => void) | undefined;

  constructor(emit: ((event: AgentEvent) => void) | undefined) {
    this.emit = emit;
  }

  complete(event: AgentEvent): void {
    this.ready.set(event.agent, event);
    while (this.cursor < EVENT_ORDER.length) {
      const next = this.ready.get(EVENT_ORDER[this.cursor] as AgentName);
      if (!next) break;
      this.cursor += 1;
      this.emit?.(next);
    }
  }
}
