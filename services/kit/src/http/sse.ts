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
 * The `Last-Event-ID` a reconnecting client sends: the id of the last event it read, which this kit's streams
 * only ever number as decimal integers. Anything else is not an id a stream gave, so it is refused (422, as
 * any invalid field) rather than ignored: ignoring it would replay the whole stream to a client that thinks
 * it is resuming.
 */
export const LastEventIdSchema = z
  .string()
  .regex(/^(0|[1-9][0-9]{0,14})$/, 'must be the id of an event of this stream: a decimal integer, 0 or more')
  .transform(Number)
  .meta({ description: 'resume: the id of the last event read; the stream sends only the events after it' });

/**
 * Takes the response over from Koa and opens an event stream. `X-Accel-Buffering: no` and `no-transform`
 * keep proxies (nginx, our gateway) from holding events back; heartbeats keep idle connections from being
 * cut by intermediaries while a long step runs. With `lastEventId` (a resumed stream) the events are
 * numbered after it, so that each event keeps its id on every connection.
 */
export function openEventStream(ctx: Context, options: { heartbeatMs: number; lastEventId?: number }): EventStream {
  const res = ctx.res;
  ctx.respond = false;
  res.writeHead(200, {
    'content-type': `${SSE_CONTENT_TYPE}; charset=utf-8`,
    'cache-control': 'no-cache, no-transform',
    connection: 'keep-alive',
    'x-accel-buffering': 'no',
  });
  const controller = new AbortController();
  let sequence = options.lastEventId ?? 0;
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
