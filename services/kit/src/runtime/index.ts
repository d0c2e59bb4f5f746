/**
 * A process's life: configuration, and the entry points of services and workers. Importing this starts
 * nothing and loads no instrumented module, so a `main` may import it before tracing is on.
 */
export * from './config.ts';
export * from './run-service.ts';
export * from './run-worker.ts';
