import type { Context, Next } from 'koa';
import { Registry, collectDefaultMetrics } from 'prom-client';
import { SeriesHistogram } from './series-histogram.ts';

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
