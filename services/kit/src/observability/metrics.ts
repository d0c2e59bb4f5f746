import type { Context, Next } from 'koa';
import { type Counter, collectDefaultMetrics, Histogram, Registry } from 'prom-client';
import { SeriesHistogram } from './series-histogram.ts';

/** Values to export for each label of a metric: every combination of them is one series. */
export type LabelGrid<L extends string> = { readonly [K in L]: readonly string[] };

/** Every combination of a grid's values, one label set each. */
function combinations<L extends string>(grid: LabelGrid<L>): Array<Record<L, string>> {
  let sets: Array<Record<string, string>> = [{}];
  for (const [name, values] of Object.entries(grid) as Array<[string, readonly string[]]>) {
    sets = sets.flatMap((set) => values.map((value) => ({ ...set, [name]: value })));
  }
  return sets as Array<Record<L, string>>;
}

/**
 * Exports `metric`'s series for every combination of label values in `grids` at 0, as Prometheus'
 * instrumentation advice asks for label values known in advance: until a series exists, rate() over it and
 * the panels reading it show no data rather than "none happened", and an alert on it cannot tell the two
 * apart. Several grids serve metrics whose valid combinations are not a full product (a provider with fewer
 * outcomes). Open-ended values (paths, ids, model names) are for the metric to create on first use: only
 * list values the code can produce, so zeroing adds no series that traffic would not add anyway. Call it
 * where the metric is created: prom-client's Histogram zeroes a series that already observed.
 */
export function zeroed<L extends string>(metric: Counter<L> | Histogram<L> | SeriesHistogram<L>, ...grids: Array<NoInfer<LabelGrid<L>>>): void {
  for (const grid of grids) {
    for (const labels of combinations(grid)) {
      if (metric instanceof SeriesHistogram) zeroSeries(metric, labels);
      else if (metric instanceof Histogram) metric.zero(labels);
      else metric.inc(labels, 0);
    }
  }
}

/** A series histogram takes its values in the order of its label names, which it keeps to itself: the series it made says whether the grid's order was that. */
function zeroSeries(histogram: SeriesHistogram<string>, labels: Record<string, string>): void {
  const made = histogram.series(...Object.values(labels)).labels;
  if (Object.entries(labels).some(([name, value]) => made[name] !== value)) {
    throw new Error(`${histogram.name}: list the labels to zero in the order of its label names (${Object.keys(made).join(', ')})`);
  }
}

/** One registry per service process, with Node's default metrics and the HTTP request histogram. */
export class Metrics {
  readonly registry = new Registry();
  readonly httpDuration: SeriesHistogram<'method' | 'route' | 'status'>;

  constructor(service: string) {
    this.registry.setDefaultLabels({ service });
    collectDefaultMetrics({ register: this.registry });
    this.httpDuration = new SeriesHistogram({
      name: 'http_server_request_duration_seconds',
      help: 'Duration of HTTP requests served, by method, route template and status',
      labelNames: ['method', 'route', 'status'],
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers: [this.registry],
    });
  }

  /** Labels by route template, never by raw path, so a path parameter cannot explode the series count. */
  middleware() {
    return async (ctx: Context, next: Next): Promise<void> => {
      const started = performance.now();
      try {
        await next();
      } finally {
        const route = (ctx as Context & { _matchedRoute?: string })._matchedRoute ?? 'unmatched';
        const status = ctx.respond === false ? ctx.res.statusCode : ctx.status;
        this.httpDuration.series(ctx.method, String(route), String(status)).observe((performance.now() - started) / 1000);
      }
    };
  }
}
