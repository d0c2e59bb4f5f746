// The shape of the rules: an alert carries its runbook and its promtool cases (alerts.ts says why).

/** One recording rule of the SLO group. */
export interface RecordingRule {
  record: string;
  expr: string;
}

export interface Runbook {
  /** What the alert means, in one paragraph. */
  meaning: string;
  /** What users see while it fires. */
  impact: string;
  /** Where to look first. */
  diagnosis: string[];
  /** What to do. */
  mitigation: string[];
}

export interface SeriesInput {
  series: string;
  /** promtool's expanding notation, e.g. `0+10x120` (one value per minute). */
  values: string;
}

export interface AlertTest {
  /** Why this case fires or stays silent. */
  name: string;
  input: SeriesInput[];
  at: string;
  /** The labels of each alert expected to fire at `at` (besides severity), or none: silent. */
  fires: Array<Record<string, string>>;
}

export interface AlertRule {
  alert: string;
  expr: string;
  for: string;
  severity: 'critical' | 'warning' | 'info';
  summary: string;
  /** May use `{{ $labels.name }}` (rendered in the tests), never `$value` (its formatting is Prometheus's). */
  description: string;
  runbook: Runbook;
  tests: AlertTest[];
}
