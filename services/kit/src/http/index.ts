/** The HTTP side of a service: app, server, routes, problems, credentials, rate limits, SSE, peers. */
export * from './app.ts';
export * from './auth.ts';
export * from './cors.ts';
export * from './errors.ts';
export * from './idempotency-key.ts';
export * from './jwt.ts';
export * from './openapi.ts';
export * from './rate-limit.ts';
export * from './raw-response.ts';
export * from './request-id.ts';
export type * from './request-state.ts';
export * from './routes.ts';
export * from './server.ts';
export * from './service-client.ts';
export * from './sse.ts';
export * from './worker-server.ts';
