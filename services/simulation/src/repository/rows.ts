import type { RUN_STATUSES } from '../migrations.ts';

export type RunStatus = (typeof RUN_STATUSES)[number];
export const TERMINAL: readonly RunStatus[] = ['completed', 'stopped', 'cancelled', 'failed'];

export interface RunRow {
  id: string;
  owner: string;
  caller: string;
  status: RunStatus;
  mode: string;
  fidelity: number;
  template: string | null;
  prompt: string | null;
  mechanisms: string[];
  plan: unknown;
  state: unknown;
  result: Record<string, unknown> | null;
  steps_done: number;
  steps_total: number;
  estimate_micros: number;
  cap_micros: number;
  cost_micros: number;
  input_tokens: number;
  output_tokens: number;
  thinking_tokens: number;
  calls: number;
  budgets: Array<{ budget: string; period: string; amount_micros: number }>;
  partial: { reason: string; detail: string } | null;
  error: { status: number; detail: string; [field: string]: unknown } | null;
  cancel_requested: boolean;
  lease_owner: string | null;
  lease_until: Date | null;
  attempts: number;
  /** The creating request's W3C trace context (traceparent, tracestate); never shown in the run's views. */
  trace: Record<string, string> | null;
  created_at: Date;
  updated_at: Date;
  started_at: Date | null;
  finished_at: Date | null;
}

export interface StepRow {
  run_id: string;
  seq: number;
  kind: string;
  label: string;
  detail: Record<string, unknown>;
  cost_micros: number;
  created_at: Date;
}

export interface LedgerRow {
  budget: string;
  period: string;
  spent_micros: number;
  reserved_micros: number;
  runs: number;
}

export type NewRun = Pick<
  RunRow,
  'id' | 'owner' | 'caller' | 'mode' | 'fidelity' | 'template' | 'prompt' | 'mechanisms' | 'plan' | 'state' | 'steps_total' | 'estimate_micros' | 'cap_micros'
> &
  Partial<Pick<RunRow, 'trace'>>;

/** pg returns bigint columns as strings: every money and token column becomes a number here. */
const NUMERIC = [
  'estimate_micros',
  'cap_micros',
  'cost_micros',
  'input_tokens',
  'output_tokens',
  'thinking_tokens',
  'spent_micros',
  'reserved_micros',
  'amount_micros',
] as const;

export function numbers<T>(row: T): T {
  if (!row) return row;
  const record = row as Record<string, unknown>;
  for (const column of NUMERIC) if (record[column] !== undefined && record[column] !== null) record[column] = Number(record[column]);
  return row;
}
