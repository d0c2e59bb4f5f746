import { InvalidAnswer } from './problems.ts';

/** One Server-Sent Event as the services send it: `id` counts from 1, `data` is JSON. */
export interface ServerEvent<Name extends string = string, Data = unknown> {
  id: string;
  event: Name;
  data: Data;
}

/** The events of a text/event-stream body, comments (heartbeats) skipped; each must carry an id, a name and JSON data. */
export async function* readEvents(body: ReadableStream<Uint8Array>, operation: string): AsyncGenerator<ServerEvent> {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  let fields: { id?: string; event?: string; data?: string } = {};
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += value;
      const lines = buffer.split(/\r\n|\r|\n/);
      buffer = lines.pop()!;
      for (const line of lines) {
        if (line === '') {
          if (fields.data !== undefined || fields.event !== undefined) yield parsed(fields, operation);
          fields = {};
          continue;
        }
        if (line.startsWith(':')) continue;
        const colon = line.indexOf(':');
        const name = colon === -1 ? line : line.slice(0, colon);
        const value = colon === -1 ? '' : line.slice(colon + 1).replace(/^ /, '');
        if (name === 'data') fields.data = fields.data === undefined ? value : `${fields.data}\n${value}`;
        else if (name === 'event' || name === 'id') fields[name] = value;
      }
    }
  } finally {
    await reader.cancel().catch(() => undefined);
  }
}

function parsed(fields: { id?: string; event?: string; data?: string }, operation: string): ServerEvent {
  if (!fields.id || !fields.event || fields.data === undefined) throw new InvalidAnswer(operation, 200, 'an event without its id, name or data');
  try {
    return { id: fields.id, event: fields.event, data: JSON.parse(fields.data) };
  } catch {
    throw new InvalidAnswer(operation, 200, `event ${fields.id} (${fields.event}) carries data that is not JSON`);
  }
}
