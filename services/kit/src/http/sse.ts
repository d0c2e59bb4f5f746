import type { Context } from 'koa';
import { z } from 'zod';

/** A Server-Sent Events response: numbered events, comment heartbeats, and the client's departure as an abort. */
export interface EventStream {
  /** Sends one event (`id`, `event`, `data` as JSON); ignored once the client has gone. */
  send(event: string, data: unknown): void;
  /** Aborted when the client closes the connection: pass it to the work the stream reports on. */
  readonly signal: AbortSignal;
  /** Whether the client is gone. */
  readonly closed: boolean;
  /** Stops the heartbeat and ends the response. */
  end(): void;
}

export const SSE_CONTENT_TYPE = 'text/event-stream';

/** One event of a stream, as OpenAPI 3.1 describes a text/event-stream response: its fields, `data` a JSON text. */
export const ServerSentEventSchema = z
  .object({ id: z.string(), event: z.string(), data: z.string().meta({ contentMediaType: 'application/json' }) })
  .meta({ id: 'ServerSentEvent', description: 'One event: `id` counts from 1, `event` names it, `data` is its JSON payload' });

/**
 * Takes the response over from Koa and opens an event stream. `X-Accel-Buffering: no` and `no-transform`
 * keep proxies (nginx, our gateway) from holding events back; heartbeats keep idle connections from being
 * cut by intermediaries while a long step runs.
 */
export function openEventStream(ctx: Context, options: { heartbeatMs: number }): EventStream {
  const res = ctx.res;
  ctx.respond = false;
  res.writeHead(200, {
    'content-type': `${SSE_CONTENT_TYPE}; charset=utf-8`,
    'cache-control': 'no-cache, no-transform',
    connection: 'keep-alive',
    'x-accel-buffering': 'no',
  });
  const controller = new AbortController();
  let sequence = 0;
  let closed = false;
  res.on('close', () => {
    closed = true;
    controller.abort();
  });
  const heartbeat = setInterval(() => {
    if (!closed) res.write(`: heartbeat ${new Date().toISOString()}\n\n`);
  }, options.heartbeatMs);
  return {
    signal: controller.signal,
    get closed() {
      return closed;
    },
    send(event, data) {
      if (closed) return;
      sequence += 1;
      res.write(`id: ${sequence}\nevent: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
    },
    end() {
      clearInterval(heartbeat);
      if (!closed) res.end();
    },
  };
}
