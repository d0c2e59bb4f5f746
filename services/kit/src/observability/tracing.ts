import { register } from 'node:module';
import { type Attributes, propagation, ROOT_CONTEXT, type Span, SpanKind, trace } from '@opentelemetry/api';
import { HttpInstrumentation } from '@opentelemetry/instrumentation-http';
import { KoaInstrumentation } from '@opentelemetry/instrumentation-koa';
import { PgInstrumentation } from '@opentelemetry/instrumentation-pg';
import { RedisInstrumentation } from '@opentelemetry/instrumentation-redis';
import { UndiciInstrumentation } from '@opentelemetry/instrumentation-undici';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { NodeSDK } from '@opentelemetry/sdk-node';
import { ATTR_SERVICE_NAME, ATTR_SERVICE_VERSION } from '@opentelemetry/semantic-conventions';

export interface Tracing {
  /** True when spans leave the process (an OTLP endpoint or exporter is configured). */
  exporting: boolean;
  shutdown(): Promise<void>;
}

/**
 * Query parameters whose values never reach a span (`url.query`, `url.full`): what users write (the graph's
 * search text, which generation's lookup sends too), and the signatures the HTTP conventions name.
 */
const REDACTED_QUERY_PARAMS = ['q', 'AWSAccessKeyId', 'Signature', 'sig', 'X-Goog-Signature'];

/** An outgoing call's URL attributes with those values replaced, as the http instrumentation does for its own; none when nothing is to hide. */
function redactedUrlAttributes(request: { origin: string; path: string }): Record<string, string> {
  const url = new URL(request.path, request.origin);
  const hidden = REDACTED_QUERY_PARAMS.filter((name) => url.searchParams.has(name));
  if (hidden.length === 0) return {};
  for (const name of hidden) url.searchParams.set(name, 'REDACTED');
  return { 'url.full': url.toString(), 'url.query': url.search };
}

/** Modules loaded through ESM `import` that the instrumentations patch; everything else is left alone. */
const HOOKED_MODULES = ['koa', '@koa/router', 'pg', 'redis', '@redis/client'];

/**
 * Starts OpenTelemetry before the service's own modules load (call it first in `main`, then import the
 * service dynamically). Configured only by the standard OTEL_* variables: with no exporter configured,
 * spans are still created, so `traceparent` propagates, but they are exported nowhere.
 */
export function startTracing(service: string, version: string, env: NodeJS.ProcessEnv = process.env): Tracing {
  if (env.OTEL_SDK_DISABLED === 'true') return { exporting: false, shutdown: async () => {} };
  // Node's ESM loader bypasses require hooks, so the instrumentations need import-in-the-middle's loader.
  register('@opentelemetry/instrumentation/hook.mjs', import.meta.url, { data: { include: HOOKED_MODULES } });

  const exporting = Boolean(
    env.OTEL_EXPORTER_OTLP_ENDPOINT || env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT || (env.OTEL_TRACES_EXPORTER && env.OTEL_TRACES_EXPORTER !== 'none'),
  );
  const sdk = new NodeSDK({
    resource: resourceFromAttributes({
      [ATTR_SERVICE_NAME]: env.OTEL_SERVICE_NAME ?? `tempora-${service}`,
      [ATTR_SERVICE_VERSION]: version,
    }),
    // An empty processor list keeps the SDK (and context propagation) on without an exporter.
    ...(exporting ? {} : { spanProcessors: [] }),
    instrumentations: [
      new HttpInstrumentation({
        ignoreIncomingRequestHook: (request) => request.url === '/health' || request.url === '/metrics',
        redactedQueryParams: REDACTED_QUERY_PARAMS,
        redactedQueryParamsServer: REDACTED_QUERY_PARAMS,
      }),
      new KoaInstrumentation(),
      // A query or command outside any request (a worker's poll, a blocking stream read) is no trace of its own.
      new PgInstrumentation({ requireParentSpan: true }),
      new RedisInstrumentation({ requireParentSpan: true }),
      // undici carries every outgoing call (fetch, the service clients, the gateway's proxy): a client span
      // each, and the traceparent that continues the trace downstream.
      new UndiciInstrumentation({ startSpanHook: redactedUrlAttributes }),
    ],
  });
  sdk.start();
  return { exporting, shutdown: () => sdk.shutdown() };
}

/**
 * Runs `work` in a `process <queue>` span, as OpenTelemetry's messaging conventions trace a consumer, for
 * work kept in a table that serves as a queue (render jobs, simulation runs): the span is a child of the
 * request that stored the work, whose W3C trace context `carrier` holds, and linked to it, so that however
 * much later or on whichever replica the work runs, it is part of that request's trace. `work` ends the span.
 */
export function processStoredWork<T>(
  tracerName: string,
  message: { queue: string; id: string; carrier: Record<string, string> | null | undefined; attributes?: Attributes },
  work: (span: Span) => Promise<T>,
): Promise<T> {
  const parent = propagation.extract(ROOT_CONTEXT, message.carrier ?? {});
  const created = trace.getSpanContext(parent);
  const attributes: Attributes = {
    'messaging.system': 'postgresql',
    'messaging.destination.name': message.queue,
    'messaging.operation.type': 'process',
    'messaging.operation.name': 'process',
    'messaging.message.id': message.id,
    ...message.attributes,
  };
  return trace
    .getTracer(tracerName)
    .startActiveSpan(`process ${message.queue}`, { kind: SpanKind.CONSUMER, attributes, links: created ? [{ context: created }] : [] }, parent, work);
}
