import { LegendDisplayMode, LegendPlacement, StackingConfigBuilder, StackingMode, VizLegendOptionsBuilder } from '@grafana/grafana-foundation-sdk/common';
import {
  type Dashboard,
  DashboardBuilder,
  DatasourceVariableBuilder,
  QueryVariableBuilder,
  RowBuilder,
  VariableRefresh,
  VariableSort,
} from '@grafana/grafana-foundation-sdk/dashboard';
import { DataqueryBuilder } from '@grafana/grafana-foundation-sdk/prometheus';
import { PanelBuilder as StatBuilder } from '@grafana/grafana-foundation-sdk/stat';
import { PanelBuilder as TimeseriesBuilder } from '@grafana/grafana-foundation-sdk/timeseries';
import { COMPONENT_LABEL, type Component } from './components.ts';

/** Every panel reads the dashboard's templated datasource, so one JSON serves any Prometheus. */
// biome-ignore lint/suspicious/noTemplateCurlyInString: Grafana's variable syntax, not a template literal.
export const DATASOURCE = { type: 'prometheus', uid: '${datasource}' };

/**
 * The selector every query carries: the platform's label, so another workload's series of the same name
 * (`up`, `http_server_*`, `controller_runtime_*`, `process_*`) never show, and the job and instance
 * variables, as kube-prometheus's mixins do, so an SRE narrows a dashboard to one service or one pod
 * without editing a query.
 */
export const SEL = `${COMPONENT_LABEL}=~"$component", job=~"$job", instance=~"$instance"`;

export interface Query {
  expr: string;
  legend: string;
}

export interface PanelSpec {
  title: string;
  description: string;
  unit: string;
  queries: Query[];
  /** Stacked series (parts of a whole), else lines. */
  stacked?: boolean;
  kind?: 'timeseries' | 'stat';
}

export interface DashboardSpec {
  uid: string;
  title: string;
  description: string;
  /** The platform's components this dashboard shows: its `component` variable offers them, and its All means all of them. */
  components: Component[];
  /** The metric whose `job` and `instance` labels fill the variables: one every job of this dashboard emits. */
  jobMetric: string;
  rows: Array<{ title: string; panels: PanelSpec[] }>;
}

const target = (query: Query, index: number) =>
  new DataqueryBuilder()
    .expr(query.expr)
    .legendFormat(query.legend)
    .refId(String.fromCharCode(65 + index))
    .datasource(DATASOURCE);

function panel(spec: PanelSpec) {
  const builder =
    spec.kind === 'stat'
      ? new StatBuilder()
      : new TimeseriesBuilder()
          .fillOpacity(spec.stacked ? 30 : 10)
          .lineWidth(1)
          .legend(new VizLegendOptionsBuilder().showLegend(true).displayMode(LegendDisplayMode.List).placement(LegendPlacement.Bottom));
  builder
    .title(spec.title)
    .description(spec.description)
    .unit(spec.unit)
    .datasource(DATASOURCE)
    .height(8)
    .span(spec.kind === 'stat' ? 6 : 12);
  spec.queries.forEach((query, index) => builder.withTarget(target(query, index)));
  if (spec.stacked && builder instanceof TimeseriesBuilder) builder.stacking(new StackingConfigBuilder().mode(StackingMode.Normal));
  return builder;
}

/** A dashboard with the datasource, component, job and instance variables, one row per concern. */
export function dashboard(spec: DashboardSpec): Dashboard {
  const builder = new DashboardBuilder(spec.title)
    .uid(spec.uid)
    .description(spec.description)
    .tags(['tempora'])
    .readonly()
    .refresh('30s')
    .time({ from: 'now-1h', to: 'now' })
    .timezone('utc')
    .withVariable(new DatasourceVariableBuilder('datasource').label('Data source').type('prometheus'))
    .withVariable(
      // All is the dashboard's components, never `.+`: every series of the platform, and no other workload's.
      new QueryVariableBuilder('component')
        .label('component')
        .datasource(DATASOURCE)
        .query(`label_values(up{${COMPONENT_LABEL}=~"${spec.components.join('|')}"}, ${COMPONENT_LABEL})`)
        .refresh(VariableRefresh.OnTimeRangeChanged)
        .sort(VariableSort.AlphabeticalAsc)
        .multi(true)
        .includeAll(true)
        .allValue(spec.components.join('|')),
    )
    .withVariable(
      new QueryVariableBuilder('job')
        .label('job')
        .datasource(DATASOURCE)
        .query(`label_values(${spec.jobMetric}{${COMPONENT_LABEL}=~"$component"}, job)`)
        .refresh(VariableRefresh.OnTimeRangeChanged)
        .sort(VariableSort.AlphabeticalAsc)
        .multi(true)
        .includeAll(true)
        .allValue('.+'),
    )
    .withVariable(
      new QueryVariableBuilder('instance')
        .label('instance')
        .datasource(DATASOURCE)
        .query(`label_values(${spec.jobMetric}{${COMPONENT_LABEL}=~"$component", job=~"$job"}, instance)`)
        .refresh(VariableRefresh.OnTimeRangeChanged)
        .sort(VariableSort.AlphabeticalAsc)
        .multi(true)
        .includeAll(true)
        .allValue('.+'),
    );
  for (const row of spec.rows) {
    builder.withRow(new RowBuilder(row.title));
    for (const spec of row.panels) builder.withPanel(panel(spec));
  }
  return builder.build();
}

/** Request rate, error ratio and latency quantiles of the kit's request histogram, by a label. */
export function red(by: string, what: string): PanelSpec[] {
  const metric = 'http_server_request_duration_seconds';
  return [
    {
      title: 'Requests',
      description: `Requests served per second, by ${what} (every status).`,
      unit: 'reqps',
      queries: [{ expr: `sum by (${by}) (rate(${metric}_count{${SEL}}[$__rate_interval]))`, legend: `{{${by}}}` }],
    },
    {
      title: 'Errors',
      description: `Share of requests answered 5xx, by ${what}. A 4xx is the caller's mistake and is not counted.`,
      unit: 'percentunit',
      queries: [
        {
          // `or … * 0` draws a healthy series at 0 instead of leaving the panel without data.
          expr: `sum by (${by}) (rate(${metric}_count{${SEL}, status=~"5.."}[$__rate_interval])) / sum by (${by}) (rate(${metric}_count{${SEL}}[$__rate_interval])) or sum by (${by}) (rate(${metric}_count{${SEL}}[$__rate_interval])) * 0`,
          legend: `{{${by}}}`,
        },
      ],
    },
    {
      title: 'Latency p50 / p99',
      description: `Median and 99th percentile time to answer, by ${what}, from the request histogram.`,
      unit: 's',
      queries: [
        { expr: `histogram_quantile(0.5, sum by (${by}, le) (rate(${metric}_bucket{${SEL}}[$__rate_interval])))`, legend: `p50 {{${by}}}` },
        { expr: `histogram_quantile(0.99, sum by (${by}, le) (rate(${metric}_bucket{${SEL}}[$__rate_interval])))`, legend: `p99 {{${by}}}` },
      ],
    },
  ];
}

/** Resident memory, CPU and event-loop lag of the Node processes (prom-client's default metrics). */
export function processPanels(): PanelSpec[] {
  return [
    {
      title: 'CPU',
      description: 'CPU seconds used per second, per process.',
      unit: 'percentunit',
      queries: [{ expr: `sum by (job, instance) (rate(process_cpu_seconds_total{${SEL}}[$__rate_interval]))`, legend: '{{job}} {{instance}}' }],
    },
    {
      title: 'Resident memory',
      description: 'Resident set size per process.',
      unit: 'bytes',
      queries: [{ expr: `process_resident_memory_bytes{${SEL}}`, legend: '{{job}} {{instance}}' }],
    },
    {
      title: 'Event-loop lag p99',
      description: 'How late timers fire on the event loop: above a few tens of milliseconds every request waits.',
      unit: 's',
      queries: [{ expr: `nodejs_eventloop_lag_p99_seconds{${SEL}}`, legend: '{{job}} {{instance}}' }],
    },
  ];
}
