/** Logs, Prometheus metrics and OpenTelemetry tracing. */
export * from './logger.ts';
export * from './metrics.ts';
export * from './random.ts';
export * from './series-histogram.ts';
export * from './tracing.ts';
