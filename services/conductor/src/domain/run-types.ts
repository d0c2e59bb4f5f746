// The types a request's run shares with its callers (the service, the journal, the reply, the metrics):
// what one call left, where a request stands between turns, how a run ended, and what it runs with.
import type { Logger } from '@tempora/kit/observability';
import type { ChatMessage, ChatTurn, ToolCall } from '@tempora/kit/providers';
import type { Ledger } from '../clients/gateway.ts';
import type { ModelChoice } from './models.ts';
import type { PriceBook } from './prices.ts';
import type { ConductorSettings, PauseReason } from './settings.ts';
import type { ConductorTool, FollowedJob, GraphSession } from './tools.ts';

/** One tool call of a request, as `tools_called` reports it and the journal keeps it. */
export interface CallRecord {
  index: number;
  tool: string;
  arguments: Record<string, unknown>;
  /** ok; failed (the tool or the charge failed; a charge is refunded); invalid (refused before running: unknown tool, bad arguments, over the per-turn limit). */
  status: 'ok' | 'failed' | 'invalid';
  /** Credits this call cost, net of its refund. */
  credits: number;
  operation: string | null;
  note: string;
  output: Record<string, unknown> | null;
  /** The refund of a failed call could not be booked yet; the conductor retries it in the background. */
  refund_pending: boolean;
  duration_ms: number;
  /** The work a paid call started that outlives it, and where its settlement is (see `JobState`). */
  job?: FollowedJob & { state: JobState };
}

/**
 * to_follow: the gateway has not taken the job yet (the conductor hands it over in the background);
 * following: the gateway follows it and settles the charge when it ends; settled: the journal shows how.
 */
export type JobState = 'to_follow' | 'following' | 'settled';

/** A call of the current model turn not carried out yet, with the index its idempotency key is made of. */
export interface PlannedCall {
  index: number;
  call: ToolCall;
}

/** Where a request stands between model turns: all a paused request needs to resume in another process. */
export interface RunState {
  /** The request's conversation with the model (the user's request first; no system prompt, no history). */
  transcript: ChatMessage[];
  /** Calls of the last turn still to carry out; the first is the one a pause waits on. */
  pending: PlannedCall[];
  next_index: number;
  steps: number;
  tokens: number;
  /** Credits the request has spent so far, net of refunds. */
  running_total: number;
  /** Whether the user has confirmed a paid call in this request (what `ask_once` waits for). */
  confirmed: boolean;
}

export interface Pause {
  index: number;
  tool: string;
  arguments: Record<string, unknown>;
  /** What the call would do, in words. */
  action: string;
  credits: number;
  operation: string;
  reason: PauseReason;
  /** The request's spend before the call. */
  running_total: number;
  ceiling: number;
  /** The balance, when the balance is what is short. */
  available?: number;
}

type StopReason = 'step_cap' | 'token_cap' | 'model_error';

export interface RunOutcome {
  status: 'completed' | 'paused' | 'stopped';
  /** The model's answer (completed), or why it stopped (model_error). */
  text: string;
  /** The calls carried out in this run, by index. */
  calls: CallRecord[];
  /** Spend of the request before this run. */
  started_total: number;
  pause?: Pause;
  stopped_by?: StopReason;
  /** A paused call the user declined in this run. */
  declined?: { tool: string; action: string };
  state: RunState;
}

/** A paid call about to be charged, as the journal holds it until the call ends. */
interface ChargingCall {
  index: number;
  tool: string;
  arguments: Record<string, unknown>;
  status: 'charging';
  credits: number;
  operation: string;
}

/**
 * Keeps every call of a request (the conversation's record, and what a follow-up refers back to), and each
 * paid call from before its charge, so that a process that dies mid-call leaves nothing unrefunded. A
 * turn's ended calls are written together when the turn ends (a paid call stays `charging` until then).
 */
export interface CallJournal {
  /** Upserts by (message, index); `key` is a paid call's ledger key (null for a free call). */
  record(entries: Array<{ record: CallRecord | ChargingCall; key: string | null }>): Promise<void>;
  /** The charge was refused (the balance was short): the call was not made. */
  forget(index: number): Promise<void>;
}

/** Everything one request runs with. */
export interface RequestContext {
  messageId: string;
  userId: string;
  requestId: string;
  settings: ConductorSettings;
  tools: ConductorTool[];
  system: string;
  /** Earlier requests of the conversation and their replies. */
  history: ChatMessage[];
  graph: GraphSession;
  journal: CallJournal;
  signal: AbortSignal;
  /** The offline planner, when the model is the offline provider. */
  plan?: (messages: ChatMessage[]) => ChatTurn;
}

export interface Caps {
  /** Model turns per request. */
  steps: number;
  /** Model tokens per request. */
  tokens: number;
  /** Tool calls one turn may make. */
  callsPerTurn: number;
}

export interface ConductorDeps {
  model: ModelChoice;
  ledger: Ledger;
  prices(requestId: string): Promise<PriceBook>;
  caps: Caps;
  logger: Logger;
  /** Observes each tool call (metrics); optional. */
  observe?(record: CallRecord, refunded: number): void;
  /** Observes each model turn (metrics); optional. */
  observeTurn?(seconds: number, tokens: number): void;
}
